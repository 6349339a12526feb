int back(void) { return fns_caller(); }
