int q(void) { return p(); }
