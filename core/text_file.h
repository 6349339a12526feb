/* The two small chores every module that reads outside files shares: reading a whole file (or
 * stdin, spelled "-") into a NUL-terminated buffer, and writing one error line into a caller's
 * buffer. Error lines are what users read, so they are always one line and never overflow. */
#ifndef DSSPEC_TEXT_FILE_H
#define DSSPEC_TEXT_FILE_H

#include <stddef.h>

/* One line into err (truncated to errlen, always terminated; newlines from quoted input become
 * spaces). A NULL err or errlen 0 is allowed and writes nothing. */
void error_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The whole of path ("-" reads standard input) as a malloc'd NUL-terminated buffer; *len (when not
 * NULL) gets its length without the NUL. NULL with err naming the file and what went wrong. */
char *text_file_read(const char *path, size_t *len, char *err, size_t errlen);

#endif
