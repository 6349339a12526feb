int cb(void) { return 0; }
