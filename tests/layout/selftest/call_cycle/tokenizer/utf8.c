int utf(void) { return buf_push(); }
