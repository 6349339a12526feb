int cb_user(void) { return 0; }
static int (*const fns[])(void) = { cb };
