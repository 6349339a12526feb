int p(void) { return q(); }
