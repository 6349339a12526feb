#ifndef T
#define T
char *text_file_read(const char *p);
#endif
