/* The report renderer behind `dsspec report`, callable without the command line (the fuzz
 * harness feeds it arbitrary JSON). */
#ifndef DSSPEC_CLI_REPORT_H
#define DSSPEC_CLI_REPORT_H

#include <stdio.h>

/* A `run --report` or `ab --report` JSON text rendered to out, and with html_path also as one
 * self-contained page. 0, or 1 after one line on stderr naming `name` (not a report; the page
 * cannot be written). */
int report_render(const char *json_text, const char *name, const char *html_path, FILE *out);

#endif
