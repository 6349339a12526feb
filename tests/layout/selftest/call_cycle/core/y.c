int y(void) { return 0; }
int y2(void) { return z(); }
