/* The one flag parser every subcommand uses: a table of flags, parsed in one pass, with the help
 * text printed from the same table so the two never disagree. `--flag value` and `--flag=value`
 * both work for every flag of every subcommand. A usage error is one line naming the flag and what was expected. */
#ifndef DSSPEC_CLI_FLAGS_H
#define DSSPEC_CLI_FLAGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    FLAG_SECTION,         /* no flag: a heading in --help */
    FLAG_SWITCH,          /* takes no value: *(int *)dst = 1 */
    FLAG_INT,             /* an integer in [lo, hi] into *(int *)dst */
    FLAG_DOUBLE,          /* a number in [lo, hi] into *(double *)dst */
    FLAG_STRING,          /* the value itself into *(const char **)dst */
    FLAG_SWITCH_OR_VALUE, /* `--x` sets *given; `--x=V` stores V into *(const char **)dst */
    FLAG_CUSTOM,          /* parse(flag, value, dst, err, errlen) decides; 0 ok, -1 bad */
    FLAG_STRING_LIST,     /* repeatable: each value appended to *(flag_strings *)dst */
} flag_kind;

enum { FLAG_LIST_MAX = 16 };
typedef struct {
    const char *v[FLAG_LIST_MAX];
    int n;
} flag_strings;

typedef int (*flag_parse_fn)(const char *flag, const char *value, void *dst, char *err, size_t errlen);

typedef struct {
    flag_kind kind;
    const char *names;    /* "-n|--n-predict" (the first spelling names the flag in errors) */
    const char *metavar;  /* "N" in `-n, --n-predict N`; NULL for switches */
    void *dst;
    double lo, hi;        /* FLAG_INT, FLAG_DOUBLE */
    flag_parse_fn parse;  /* FLAG_CUSTOM */
    int *given;           /* optional: set to 1 when the flag appears */
    const char *help;     /* one line; FLAG_SECTION: the heading */
} flag;

/* Parses argv[1..argc) against flags[0..n). Arguments that are not flags go to positional (at most
 * max_positional; more is a usage error). Returns 0 ok, 1 when --help was printed (to stdout, with
 * usage_line first), 2 on a usage error (printed to stderr as "dsspec CMD: ... (see dsspec CMD --help)"). */
int flags_parse(const char *cmd, const char *usage_line, const flag *flags, int n, int argc, char **argv,
                const char **positional, int max_positional, int *n_positional);
void flags_print_help(const char *usage_line, const flag *flags, int n, FILE *out);
/* Prints a usage error for cmd the way flags_parse does and returns 2. */
int flags_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Value parsers shared by the subcommands (FLAG_CUSTOM), each naming the flag when it fails. */
int flag_parse_on_off(const char *flag, const char *value, void *dst, char *err, size_t errlen);  /* int */
int flag_parse_size(const char *flag, const char *value, void *dst, char *err, size_t errlen);    /* int64_t bytes */
int flag_parse_seed(const char *flag, const char *value, void *dst, char *err, size_t errlen);    /* uint64_t */
int flag_parse_id_list_check(const char *flag, const char *value, void *dst, char *err, size_t errlen); /* const char* */

/* "3,17,42" (commas and/or white space) -> malloc'd ids; count, or -1 with err naming the flag. */
int parse_id_list(const char *flag, const char *s, int **ids, char *err, size_t errlen);
/* "25G", "512M", "1.5GiB", "1048576" -> bytes; -1 when malformed. */
int64_t parse_size(const char *s);

#endif
