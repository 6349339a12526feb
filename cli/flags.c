#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli/flags.h"

/* Whether arg (without any "=value") is one of the '|'-separated spellings in names. */
static int names_match(const char *names, const char *arg, size_t arg_len)
{
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == arg_len && !strncmp(p, arg, len)) return 1;
        p += len + (bar ? 1 : 0);
    }
    return 0;
}

static const flag *find_flag(const flag *flags, int n, const char *arg, size_t len)
{
    for (int i = 0; i < n; i++)
        if (flags[i].kind != FLAG_SECTION && names_match(flags[i].names, arg, len)) return &flags[i];
    return NULL;
}

static int store_number(const flag *f, const char *name, const char *v, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    if (f->kind == FLAG_INT) {
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < f->lo || x > f->hi) {
            snprintf(err, errlen, "%s: expected an integer in [%.0f, %.0f], got '%s'", name, f->lo, f->hi, v);
            return -1;
        }
        *(int *)f->dst = (int)x;
        return 0;
    }
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= f->lo && x <= f->hi)) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g], got '%s'", name, f->lo, f->hi, v);
        return -1;
    }
    *(double *)f->dst = x;
    return 0;
}

static int store_value(const flag *f, const char *name, const char *v, char *err, size_t errlen)
{
    switch (f->kind) {
    case FLAG_INT:
    case FLAG_DOUBLE: return store_number(f, name, v, err, errlen);
    case FLAG_STRING:
    case FLAG_SWITCH_OR_VALUE: *(const char **)f->dst = v; return 0;
    case FLAG_CUSTOM: return f->parse(name, v, f->dst, err, errlen);
    case FLAG_STRING_LIST: {
        flag_strings *l = f->dst;
        if (l->n == FLAG_LIST_MAX) { snprintf(err, errlen, "%s: at most %d are allowed", name, FLAG_LIST_MAX); return -1; }
        l->v[l->n++] = v;
        return 0;
    }
    default: return 0;
    }
}

/* One flag at argv[*i]; advances *i past a separate value. 0, or -1 with err. */
static int parse_one(const flag *flags, int n, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *arg = argv[*i], *eq = !strncmp(arg, "--", 2) ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const flag *f = find_flag(flags, n, arg, len);
    if (!f) { snprintf(err, errlen, "unknown flag '%.*s'", (int)len, arg); return -1; }
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)len, arg);
    if (f->given) *f->given = 1;
    if (f->kind == FLAG_SWITCH) {
        if (eq) { snprintf(err, errlen, "%s takes no value", name); return -1; }
        *(int *)f->dst = 1;
        return 0;
    }
    if (f->kind == FLAG_SWITCH_OR_VALUE && !eq) return 0;
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
        if (*i + 1 >= argc) { snprintf(err, errlen, "%s needs a value", name); return -1; }
        v = argv[++*i];
        /* `--chat -p TEXT`: the next word is one of this command's flags, not a value */
        const char *veq = !strncmp(v, "--", 2) ? strchr(v, '=') : NULL;
        if (v[0] == '-' && find_flag(flags, n, v, veq ? (size_t)(veq - v) : strlen(v))) {
            snprintf(err, errlen, "%s needs a value, got the flag '%s'", name, v);
            return -1;
        }
    }
    return store_value(f, name, v, err, errlen);
}

int flags_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dsspec %s: %s (see dsspec %s --help)\n", cmd, msg, cmd);
    return 2;
}

int flags_parse(const char *cmd, const char *usage_line, const flag *flags, int n, int argc, char **argv,
                const char **positional, int max_positional, int *n_positional)
{
    char err[1024];
    if (n_positional) *n_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { flags_print_help(usage_line, flags, n, stdout); return 1; }
        if (a[0] != '-' || !strcmp(a, "-")) {
            if (!n_positional || *n_positional >= max_positional) return flags_usage_error(cmd, "unexpected argument '%s'", a);
            positional[(*n_positional)++] = a;
            continue;
        }
        if (parse_one(flags, n, argc, argv, &i, err, sizeof err)) return flags_usage_error(cmd, "%s", err);
    }
    return 0;
}

void flags_print_help(const char *usage_line, const flag *flags, int n, FILE *out)
{
    fprintf(out, "%s\n", usage_line);
    for (int i = 0; i < n; i++) {
        const flag *f = &flags[i];
        if (f->kind == FLAG_SECTION) { fprintf(out, "%s:\n", f->help); continue; }
        char left[96] = "", *p = left;
        for (const char *s = f->names; *s; s++) {
            if (*s == '|') { p += snprintf(p, sizeof left - (size_t)(p - left), ", "); continue; }
            if ((size_t)(p - left) < sizeof left - 1) *p++ = *s;
        }
        *p = 0;
        if (f->metavar)
            snprintf(p, sizeof left - (size_t)(p - left), f->kind == FLAG_SWITCH_OR_VALUE ? "[=%s]" : " %s", f->metavar);
        fprintf(out, "  %-24s %s\n", left, f->help);
    }
}

int flag_parse_on_off(const char *flag, const char *v, void *dst, char *err, size_t errlen)
{
    if (!strcmp(v, "on") || !strcmp(v, "off")) { *(int *)dst = !strcmp(v, "on"); return 0; }
    snprintf(err, errlen, "%s: expected on or off, got '%s'", flag, v);
    return -1;
}

int64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || errno || !(x >= 0)) return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: return -1;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I')) end++;
    if (mul > 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end || x * mul >= 9.2e18) return -1;
    return (int64_t)(x * mul);
}

int flag_parse_size(const char *flag, const char *v, void *dst, char *err, size_t errlen)
{
    int64_t bytes = parse_size(v);
    if (bytes <= 0) { snprintf(err, errlen, "%s: expected a size like 24G or 512M, got '%s'", flag, v); return -1; }
    *(int64_t *)dst = bytes;
    return 0;
}

int flag_parse_seed(const char *flag, const char *v, void *dst, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        snprintf(err, errlen, "%s: expected an integer in [0, 2^64), got '%s'", flag, v);
        return -1;
    }
    *(uint64_t *)dst = x;
    return 0;
}

int parse_id_list(const char *flag, const char *s, int **ids, char *err, size_t errlen)
{
    int n = 0, cap = 16;
    int *v = malloc(cap * sizeof *v);
    for (const char *p = s; v;) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > 0x7fffffff || (*end && *end != ',' && !isspace((unsigned char)*end))) {
            snprintf(err, errlen, "%s: '%.20s' is not a token id (expected integers >= 0 separated by commas or spaces)", flag, p);
            free(v);
            return -1;
        }
        if (n == cap) {
            int *grown = realloc(v, (cap *= 2) * sizeof *v);
            if (!grown) { free(v); v = NULL; break; }
            v = grown;
        }
        v[n++] = (int)x;
        p = end;
    }
    if (!v) { snprintf(err, errlen, "out of memory"); return -1; }
    if (n == 0) { snprintf(err, errlen, "%s: expected at least one token id", flag); free(v); return -1; }
    *ids = v;
    return n;
}

/* --ids is checked while parsing so that a bad list fails before any model loads. */
int flag_parse_id_list_check(const char *flag, const char *v, void *dst, char *err, size_t errlen)
{
    int *ids;
    if (parse_id_list(flag, v, &ids, err, errlen) < 0) return -1;
    free(ids);
    *(const char **)dst = v;
    return 0;
}
