int fns_caller(void) { return 0; }
int (*const hook)(void) = back;
