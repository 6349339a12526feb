int z(void) { return x(); }
