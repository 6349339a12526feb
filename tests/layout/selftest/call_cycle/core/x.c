int x(void) { return y(); }
