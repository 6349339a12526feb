int bpe(void) { return buf_push() + level(); }
int buf_push(void) { return 0; }
