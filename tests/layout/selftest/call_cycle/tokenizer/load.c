int level(void) { return 1; }
int load(void) { return bpe() + utf(); }
