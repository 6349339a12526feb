static int level(void) { return 2; }
int pre(void) { return level() + utf(); }
