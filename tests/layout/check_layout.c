/* check_layout: the source tree's structural rules, checked by ctest (CI machines have no python).
 *
 *   check_layout SRC_DIR           checks SRC_DIR; one line per violation and exit 1, or a summary
 *   check_layout --functions SRC   the same, and every function found (with its length) on stderr
 *   check_layout --selftest DIR    runs the checker on each fake tree DIR/CASE and compares its
 *                                  violations with DIR/CASE/expected.txt
 *
 * Rules, for the .c and .h files under the module folders (a missing folder is skipped):
 *   1. #include "dir/file.h" only along the allowed module edges (table below);
 *   2. a private header (*_internal.h, io/io_backend.h) only from its own folder;
 *   3. no include cycle among headers;
 *   4. no circle of calls between the .c files of one folder (A.c uses a non-static function
 *      defined in B.c, ... back to A.c);
 *   5. no function longer than 80 lines, except in the SIMD kernels (kernels_avx*.c,
 *      kernels_driver.h), which are long straight-line code by design.
 * The C scanner is deliberately crude: comments, strings and preprocessor lines are blanked, and a
 * function definition is an identifier followed by (...) and a { body at brace depth 0. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FUNCTION_LINES 80

static const char *const MODULES[] = {"cli", "engine", "speculate", "cache", "io", "core", "tokenizer"};
#define N_MODULES (sizeof MODULES / sizeof MODULES[0])
/* What each module may include, in MODULES order; an entry with a '/' allows one header only. */
static const char *const ALLOWED[N_MODULES][7] = {
    {"cli", "engine"},
    {"engine", "speculate", "cache", "io", "core", "tokenizer"},
    {"speculate", "core"},
    {"cache", "io", "core"},
    {"io", "core"},
    {"core"},
    {"tokenizer", "core/text_file.h"},
};

/* ------------------------------------------------------------------ small helpers */

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) { fprintf(stderr, "check_layout: out of memory\n"); exit(2); }
    return p;
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = xrealloc(NULL, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

typedef struct { char **v; size_t n, cap; } strvec;

static void sv_push(strvec *s, char *str)
{
    if (s->n == s->cap) { s->cap = s->cap ? 2 * s->cap : 16; s->v = xrealloc(s->v, s->cap * sizeof *s->v); }
    s->v[s->n++] = str;
}

static void sv_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorts and drops duplicates. */
static void sv_uniq(strvec *s)
{
    if (!s->n) return;
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
    size_t w = 1;
    for (size_t i = 1; i < s->n; i++) {
        if (strcmp(s->v[i], s->v[w - 1])) s->v[w++] = s->v[i];
        else free(s->v[i]);
    }
    s->n = w;
}

/* "a, b, c" (malloc'd) */
static char *sv_join(const strvec *s, const char *sep)
{
    size_t len = 1;
    for (size_t i = 0; i < s->n; i++) len += strlen(s->v[i]) + strlen(sep);
    char *out = xrealloc(NULL, len);
    out[0] = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (i) strcat(out, sep);
        strcat(out, s->v[i]);
    }
    return out;
}

static char *read_whole(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 4096 + 1 > cap) { cap = cap ? 2 * cap : 65536; buf = xrealloc(buf, cap); }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int is_ident_start(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* ------------------------------------------------------------------ files */

typedef struct { char *target; int line; int resolved; /* index into files, -1 if outside */ } include;
typedef struct { char *name; int line, lines, is_static; } function;

typedef struct {
    char *path;   /* relative to the source dir, e.g. "core/model.c" */
    char *dir;    /* "core" */
    int module;   /* index into MODULES */
    int is_header, length_exempt;
    include *incs; size_t n_incs;
    function *fns; size_t n_fns;
    strvec uses;  /* identifiers used in function bodies and file-scope initializers, sorted */
} src_file;

typedef struct {
    const char *root;
    src_file *files; size_t n_files;
    strvec violations;
    size_t n_functions;
    const src_file *longest_file; const function *longest;
} tree;

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const src_file *)a)->path, ((const src_file *)b)->path);
}

static void collect(tree *t, const char *rel, int module)
{
    char *full = xprintf("%s/%s", t->root, rel);
    DIR *d = opendir(full);
    free(full);
    if (!d) return;
    strvec names = {0};
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') sv_push(&names, xprintf("%s/%s", rel, e->d_name));
    closedir(d);
    sv_uniq(&names);
    for (size_t i = 0; i < names.n; i++) {
        char *p = names.v[i], *fp = xprintf("%s/%s", t->root, p);
        if (is_dir(fp)) collect(t, p, module);
        else if (ends_with(p, ".c") || ends_with(p, ".h")) {
            t->files = xrealloc(t->files, (t->n_files + 1) * sizeof *t->files);
            src_file *f = &t->files[t->n_files++];
            memset(f, 0, sizeof *f);
            f->path = xstrndup(p, strlen(p));
            f->dir = xstrndup(p, (size_t)(base_name(p) - 1 - p));
            f->module = module;
            f->is_header = ends_with(p, ".h");
            const char *b = base_name(p);
            f->length_exempt = (!strncmp(b, "kernels_avx", 11) && ends_with(b, ".c")) || !strcmp(b, "kernels_driver.h");
        }
        free(fp);
    }
    sv_free(&names);
}

/* ------------------------------------------------------------------ scanning one file */

/* Records `#include "..."` of the directive starting at raw[at] (a '#'). */
static void note_include(src_file *f, const char *raw, size_t at, int line)
{
    const char *p = raw + at + 1;
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, "include", 7)) return;
    p += 7;
    while (*p == ' ' || *p == '\t') p++;
    if (*p != '"') return;
    const char *end = strchr(p + 1, '"'), *nl = strchr(p + 1, '\n');
    if (!end || (nl && nl < end)) return;
    f->incs = xrealloc(f->incs, (f->n_incs + 1) * sizeof *f->incs);
    f->incs[f->n_incs++] = (include){xstrndup(p + 1, (size_t)(end - p - 1)), line, -1};
}

enum lex_state { CODE, LINE_COMMENT, BLOCK_COMMENT, STRING, CHAR, DIRECTIVE };

/* A copy of raw with comments, string/char contents and preprocessor directives turned into
 * spaces (newlines kept, so line numbers still match); the #include lines are noted on the way. */
static char *blank(src_file *f, const char *raw)
{
    size_t n = strlen(raw);
    char *out = xstrndup(raw, n);
    enum lex_state st = CODE, after_comment = CODE;
    int line = 1, at_line_start = 1;
    for (size_t i = 0; i < n; i++) {
        char c = raw[i], next = raw[i + 1];
        if (c == '\n') { line++; at_line_start = 1; }
        int keep = c == '\n', pair = 0; /* pair: c and next are consumed together */
        switch (st) {
        case CODE:
            if (c == '/' && next == '/') st = LINE_COMMENT;
            else if (c == '/' && next == '*') { st = BLOCK_COMMENT; after_comment = CODE; pair = 1; }
            else if (c == '"' || c == '\'') { st = c == '"' ? STRING : CHAR; keep = 1; }
            else if (c == '#' && at_line_start) { st = DIRECTIVE; note_include(f, raw, i, line); }
            else keep = 1;
            break;
        case LINE_COMMENT:
            if (c == '\n') st = CODE;
            break;
        case BLOCK_COMMENT:
            if (c == '*' && next == '/') { st = after_comment; pair = 1; }
            break;
        case STRING: case CHAR:
            if (c == '\\' && next) pair = 1;
            else if (c == (st == STRING ? '"' : '\'') || c == '\n') { st = CODE; keep = 1; }
            break;
        case DIRECTIVE:
            if (c == '\\' && next == '\n') pair = 1; /* the directive goes on */
            else if (c == '/' && next == '*') { st = BLOCK_COMMENT; after_comment = DIRECTIVE; pair = 1; }
            else if (c == '/' && next == '/') st = LINE_COMMENT;
            else if (c == '\n') st = CODE;
            break;
        }
        if (!keep) out[i] = ' ';
        if (pair) {
            i++;
            if (raw[i] == '\n') line++;
            else out[i] = ' ';
        }
        if (c != '\n' && c != ' ' && c != '\t' && st == CODE) at_line_start = 0;
    }
    return out;
}

typedef struct { const char *s; int len, line; } token; /* len 0 never occurs */

static token *lex(const char *code, size_t *count)
{
    token *tk = NULL;
    size_t n = 0, cap = 0;
    int line = 1;
    for (const char *p = code; *p;) {
        if (*p == '\n') { line++; p++; continue; }
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f' || *p == '\v') { p++; continue; }
        const char *s = p;
        if (is_ident_start(*p) || (*p >= '0' && *p <= '9')) while (is_ident_char(*p) || *p == '.') {
            if (*p == '.' && is_ident_start(*s)) break; /* a.b: '.' is its own token */
            p++;
        }
        else if (p[0] == '-' && p[1] == '>') p += 2;
        else p++;
        if (n == cap) { cap = cap ? 2 * cap : 1024; tk = xrealloc(tk, cap * sizeof *tk); }
        tk[n++] = (token){s, (int)(p - s), line};
    }
    *count = n;
    return tk;
}

static int tok_is(const token *t, const char *s) { return (size_t)t->len == strlen(s) && !memcmp(t->s, s, (size_t)t->len); }
static int tok_ident(const token *t) { return is_ident_start(t->s[0]); }

/* The '(' matching the ')' at tk[close], or -1. */
static long matching_open(const token *tk, long close, long floor)
{
    int depth = 0;
    for (long i = close; i >= floor; i--) {
        if (tok_is(&tk[i], ")")) depth++;
        else if (tok_is(&tk[i], "(") && --depth == 0) return i;
    }
    return -1;
}

/* At a '{' at depth 0 with the declaration tk[from..brace): the index of the function's name if
 * this opens a function body (trailing __attribute__((...)) groups are skipped), else -1. */
static long function_name_at(const token *tk, long from, long brace)
{
    long j = brace - 1;
    while (j > from && tok_is(&tk[j], ")")) {
        long open = matching_open(tk, j, from);
        if (open <= from || !tok_ident(&tk[open - 1])) return -1;
        if (!tok_is(&tk[open - 1], "__attribute__")) return open - 1;
        j = open - 2;
    }
    return -1;
}

static int decl_is_static(const token *tk, long from, long name)
{
    for (long i = from; i < name; i++)
        if (tok_is(&tk[i], "static")) return 1;
    return 0;
}

static void add_function(src_file *f, const token *name, int is_static)
{
    f->fns = xrealloc(f->fns, (f->n_fns + 1) * sizeof *f->fns);
    f->fns[f->n_fns++] = (function){xstrndup(name->s, (size_t)name->len), name->line, 0, is_static};
}

/* Finds function definitions (with their length in lines) and the identifiers used in function
 * bodies and file-scope initializers. Member names (after . or ->) are not uses. */
static void scan_tokens(src_file *f, const token *tk, long n)
{
    long decl = 0, depth = 0;
    int in_init = 0, in_function = 0, open_line = 0;
    for (long i = 0; i < n; i++) {
        const token *t = &tk[i];
        if (depth == 0 && tok_is(t, ";")) { decl = i + 1; in_init = 0; continue; }
        if (depth == 0 && tok_is(t, "=")) { in_init = 1; continue; }
        if (tok_is(t, "{")) {
            if (depth++ == 0 && !in_init) {
                long name = function_name_at(tk, decl, i);
                if (name >= 0) {
                    add_function(f, &tk[name], decl_is_static(tk, decl, name));
                    in_function = 1;
                    open_line = t->line;
                }
            }
            continue;
        }
        if (tok_is(t, "}")) {
            if (depth > 0 && --depth == 0 && in_function) {
                f->fns[f->n_fns - 1].lines = t->line - open_line + 1;
                in_function = 0;
                decl = i + 1;
            }
            continue;
        }
        int member = i > 0 && (tok_is(&tk[i - 1], ".") || tok_is(&tk[i - 1], "->"));
        if (tok_ident(t) && !member && ((depth > 0 && in_function) || in_init))
            sv_push(&f->uses, xstrndup(t->s, (size_t)t->len));
    }
    sv_uniq(&f->uses);
}

static int scan_file(tree *t, src_file *f)
{
    char *full = xprintf("%s/%s", t->root, f->path);
    char *raw = read_whole(full);
    free(full);
    if (!raw) { fprintf(stderr, "check_layout: cannot read %s/%s\n", t->root, f->path); return -1; }
    char *code = blank(f, raw);
    size_t n;
    token *tk = lex(code, &n);
    scan_tokens(f, tk, (long)n);
    free(tk); free(code); free(raw);
    return 0;
}

/* ------------------------------------------------------------------ rules 1, 2, 5: per file */

static void violation(tree *t, char *line) { sv_push(&t->violations, line); }

static long find_file(const tree *t, const char *rel)
{
    for (size_t i = 0; i < t->n_files; i++)
        if (!strcmp(t->files[i].path, rel)) return (long)i;
    return -1;
}

/* "dir/file.h" is looked up from the source dir first, then from the including file's folder. */
static void resolve_includes(tree *t, src_file *f)
{
    for (size_t k = 0; k < f->n_incs; k++) {
        include *inc = &f->incs[k];
        inc->resolved = (int)find_file(t, inc->target);
        if (inc->resolved < 0) {
            char *rel = xprintf("%s/%s", f->dir, inc->target);
            inc->resolved = (int)find_file(t, rel);
            free(rel);
        }
    }
}

static int module_index(const char *name, size_t len)
{
    for (size_t m = 0; m < N_MODULES; m++)
        if (strlen(MODULES[m]) == len && !strncmp(MODULES[m], name, len)) return (int)m;
    return -1;
}

static int include_allowed(int module, const char *target)
{
    const char *slash = strchr(target, '/');
    size_t len = (size_t)(slash - target);
    for (size_t a = 0; a < 7 && ALLOWED[module][a]; a++) {
        const char *rule = ALLOWED[module][a];
        if (strchr(rule, '/') ? !strcmp(rule, target) : (strlen(rule) == len && !strncmp(rule, target, len)))
            return 1;
    }
    return 0;
}

static int is_private_header(const char *path)
{
    return ends_with(path, "_internal.h") || !strcmp(path, "io/io_backend.h");
}

static void check_includes(tree *t, const src_file *f)
{
    for (size_t k = 0; k < f->n_incs; k++) {
        const include *inc = &f->incs[k];
        const char *target = inc->resolved >= 0 ? t->files[inc->resolved].path : inc->target;
        const char *slash = strchr(target, '/');
        if (slash) {
            int to = module_index(target, (size_t)(slash - target));
            char *top = xstrndup(target, (size_t)(slash - target)), *there = xprintf("%s/%s", t->root, top);
            int in_tree = to >= 0 || is_dir(there); /* not a library's header such as cjson/cJSON.h */
            free(top); free(there);
            if (in_tree && !include_allowed(f->module, target)) {
                strvec allowed = {0};
                for (size_t a = 0; a < 7 && ALLOWED[f->module][a]; a++) sv_push(&allowed, xstrndup(ALLOWED[f->module][a], strlen(ALLOWED[f->module][a])));
                char *list = sv_join(&allowed, ", ");
                violation(t, xprintf("%s:%d: module %s must not include %s (allowed: %s)", f->path, inc->line,
                                     MODULES[f->module], target, list));
                free(list); sv_free(&allowed);
            }
        }
        if (is_private_header(target)) {
            const char *own = strrchr(target, '/');
            size_t own_len = own ? (size_t)(own - target) : 0;
            if (strlen(f->dir) != own_len || strncmp(f->dir, target, own_len))
                violation(t, xprintf("%s:%d: private header %s may be included only from %.*s/", f->path, inc->line,
                                     target, (int)own_len, target));
        }
    }
}

static void check_lengths(tree *t, const src_file *f)
{
    for (size_t k = 0; k < f->n_fns; k++) {
        const function *fn = &f->fns[k];
        t->n_functions++;
        if (f->length_exempt) continue;
        if (!t->longest || fn->lines > t->longest->lines) { t->longest = fn; t->longest_file = f; }
        if (fn->lines > MAX_FUNCTION_LINES)
            violation(t, xprintf("%s:%d: function %s is %d lines (limit %d)", f->path, fn->line, fn->name,
                                 fn->lines, MAX_FUNCTION_LINES));
    }
}

/* ------------------------------------------------------------------ rule 3: include cycles */

/* Depth-first search over header -> header edges; a back edge to a header on the stack closes a
 * cycle, reported once from that header. */
static void include_dfs(tree *t, size_t v, char *color, size_t *stack, size_t depth)
{
    color[v] = 1;
    stack[depth] = v;
    const src_file *f = &t->files[v];
    for (size_t k = 0; k < f->n_incs; k++) {
        int w = f->incs[k].resolved;
        if (w < 0 || !t->files[w].is_header) continue;
        if (color[w] == 0) include_dfs(t, (size_t)w, color, stack, depth + 1);
        else if (color[w] == 1) {
            strvec path = {0};
            size_t from = depth;
            while (stack[from] != (size_t)w) from--;
            for (size_t i = from; i <= depth; i++) sv_push(&path, xstrndup(t->files[stack[i]].path, strlen(t->files[stack[i]].path)));
            sv_push(&path, xstrndup(t->files[w].path, strlen(t->files[w].path)));
            char *chain = sv_join(&path, " -> ");
            violation(t, xprintf("%s:%d: include cycle: %s", f->path, f->incs[k].line, chain));
            free(chain); sv_free(&path);
        }
    }
    color[v] = 2;
}

static void check_include_cycles(tree *t)
{
    char *color = calloc(t->n_files + 1, 1);
    size_t *stack = xrealloc(NULL, (t->n_files + 1) * sizeof *stack);
    if (!color) exit(2);
    for (size_t v = 0; v < t->n_files; v++)
        if (t->files[v].is_header && !color[v]) include_dfs(t, v, color, stack, 0);
    free(color); free(stack);
}

/* ------------------------------------------------------------------ rule 4: call circles */

typedef struct { const char *name; size_t owner; } definition;

static int cmp_def(const void *a, const void *b)
{
    return strcmp(((const definition *)a)->name, ((const definition *)b)->name);
}

static int defines(const src_file *f, const char *name)
{
    for (size_t k = 0; k < f->n_fns; k++)
        if (!strcmp(f->fns[k].name, name)) return 1;
    return 0;
}

/* names[a * m + b]: the functions of c[b] that c[a] uses. */
static strvec *call_edges(const tree *t, const size_t *c, size_t m)
{
    definition *defs = NULL;
    size_t n_defs = 0;
    for (size_t j = 0; j < m; j++) {
        const src_file *f = &t->files[c[j]];
        for (size_t k = 0; k < f->n_fns; k++)
            if (!f->fns[k].is_static) {
                defs = xrealloc(defs, (n_defs + 1) * sizeof *defs);
                defs[n_defs++] = (definition){f->fns[k].name, j};
            }
    }
    if (n_defs) qsort(defs, n_defs, sizeof *defs, cmp_def);
    strvec *names = calloc(m * m, sizeof *names);
    if (!names) exit(2);
    for (size_t a = 0; a < m; a++) {
        const src_file *f = &t->files[c[a]];
        for (size_t u = 0; u < f->uses.n; u++) {
            definition key = {f->uses.v[u], 0};
            const definition *d = n_defs ? bsearch(&key, defs, n_defs, sizeof *defs, cmp_def) : NULL;
            if (d && d->owner != a && !defines(f, key.name))
                sv_push(&names[a * m + d->owner], xstrndup(key.name, strlen(key.name)));
        }
    }
    free(defs);
    return names;
}

static void reach_from(const strvec *names, size_t m, size_t a, char *seen)
{
    for (size_t b = 0; b < m; b++)
        if (names[a * m + b].n && !seen[b]) { seen[b] = 1; reach_from(names, m, b, seen); }
}

static void append_edge(strvec *parts, const tree *t, const size_t *c, const strvec *names, size_t m, size_t a, size_t b)
{
    char *list = sv_join(&names[a * m + b], ", ");
    sv_push(parts, xprintf("%s (%s)", base_name(t->files[c[b]].path), list));
    free(list);
}

/* One circle through c[first] (shortest, by breadth-first search inside its strongly connected
 * set in_scc), then every other edge inside the set, so that all the ties are named. */
static void report_circle(tree *t, const char *dir, const size_t *c, const strvec *names, size_t m, size_t first,
                          const char *in_scc)
{
    size_t *parent = xrealloc(NULL, m * sizeof *parent), *queue = xrealloc(NULL, m * sizeof *queue);
    char *on_cycle = calloc(m * m, 1), *seen = calloc(m, 1);
    if (!on_cycle || !seen) exit(2);
    size_t head = 0, tail = 0, last = first;
    queue[tail++] = first; seen[first] = 1;
    while (head < tail) {
        size_t x = queue[head++];
        if (names[x * m + first].n) { last = x; break; }
        for (size_t y = 0; y < m; y++)
            if (in_scc[y] && !seen[y] && names[x * m + y].n) { seen[y] = 1; parent[y] = x; queue[tail++] = y; }
    }
    size_t len = 1;
    for (size_t x = last; x != first; x = parent[x]) len++;
    size_t *path = xrealloc(NULL, (len + 1) * sizeof *path);
    path[len] = first;
    for (size_t x = last, i = len - 1;; x = parent[x], i--) { path[i] = x; if (x == first) break; }
    strvec parts = {0};
    sv_push(&parts, xstrndup(base_name(t->files[c[first]].path), strlen(base_name(t->files[c[first]].path))));
    for (size_t i = 0; i < len; i++) { append_edge(&parts, t, c, names, m, path[i], path[i + 1]); on_cycle[path[i] * m + path[i + 1]] = 1; }
    char *line = sv_join(&parts, " -> ");
    sv_free(&parts);
    strvec extra = {0};
    for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < m; b++)
            if (in_scc[a] && in_scc[b] && names[a * m + b].n && !on_cycle[a * m + b]) {
                strvec one = {0};
                sv_push(&one, xstrndup(base_name(t->files[c[a]].path), strlen(base_name(t->files[c[a]].path))));
                append_edge(&one, t, c, names, m, a, b);
                sv_push(&extra, sv_join(&one, " -> "));
                sv_free(&one);
            }
    char *also = sv_join(&extra, "; ");
    violation(t, xprintf("%s/: circle: %s%s%s", dir, line, extra.n ? "; also: " : "", also));
    free(also); sv_free(&extra); free(line);
    free(path); free(parent); free(queue); free(on_cycle); free(seen);
}

static void check_folder_calls(tree *t, const char *dir)
{
    size_t *c = NULL, m = 0;
    for (size_t i = 0; i < t->n_files; i++)
        if (!t->files[i].is_header && !strcmp(t->files[i].dir, dir)) { c = xrealloc(c, (m + 1) * sizeof *c); c[m++] = i; }
    if (m < 2) { free(c); return; }
    strvec *names = call_edges(t, c, m);
    char *reach = calloc(m * m, 1), *done = calloc(m, 1), *in_scc = calloc(m, 1);
    if (!reach || !done || !in_scc) exit(2);
    for (size_t a = 0; a < m; a++) reach_from(names, m, a, reach + a * m);
    for (size_t a = 0; a < m; a++) {
        if (done[a] || !reach[a * m + a]) continue; /* not on any circle */
        for (size_t b = 0; b < m; b++) in_scc[b] = reach[a * m + b] && reach[b * m + a];
        for (size_t b = 0; b < m; b++) done[b] |= in_scc[b];
        report_circle(t, dir, c, names, m, a, in_scc);
    }
    for (size_t i = 0; i < m * m; i++) sv_free(&names[i]);
    free(names); free(reach); free(done); free(in_scc); free(c);
}

static void check_call_circles(tree *t)
{
    strvec dirs = {0};
    for (size_t i = 0; i < t->n_files; i++) sv_push(&dirs, xstrndup(t->files[i].dir, strlen(t->files[i].dir)));
    sv_uniq(&dirs);
    for (size_t d = 0; d < dirs.n; d++) check_folder_calls(t, dirs.v[d]);
    sv_free(&dirs);
}

/* ------------------------------------------------------------------ driver */

static void tree_free(tree *t)
{
    for (size_t i = 0; i < t->n_files; i++) {
        src_file *f = &t->files[i];
        for (size_t k = 0; k < f->n_incs; k++) free(f->incs[k].target);
        for (size_t k = 0; k < f->n_fns; k++) free(f->fns[k].name);
        free(f->incs); free(f->fns); free(f->path); free(f->dir);
        sv_free(&f->uses);
    }
    free(t->files);
    sv_free(&t->violations);
}

/* Checks the tree at root, writing violations (or the summary) to out. Returns the number of
 * violations, or -1 when there is nothing to check (no module folder at all) or a file is unreadable. */
static long check_tree(const char *root, FILE *out, int list_functions)
{
    tree t = {.root = root};
    for (size_t m = 0; m < N_MODULES; m++) collect(&t, MODULES[m], (int)m);
    if (t.n_files) qsort(t.files, t.n_files, sizeof *t.files, cmp_file); /* output in path order */
    long rc = 0;
    if (!t.n_files) { fprintf(out, "no .c or .h files under any module folder\n"); rc = -1; }
    for (size_t i = 0; i < t.n_files && rc == 0; i++) rc = scan_file(&t, &t.files[i]);
    if (rc == 0) {
        for (size_t i = 0; i < t.n_files; i++) resolve_includes(&t, &t.files[i]);
        for (size_t i = 0; i < t.n_files; i++) { check_includes(&t, &t.files[i]); check_lengths(&t, &t.files[i]); }
        check_include_cycles(&t);
        check_call_circles(&t);
        for (size_t i = 0; i < t.violations.n; i++) fprintf(out, "%s\n", t.violations.v[i]);
        rc = (long)t.violations.n;
        if (list_functions)
            for (size_t i = 0; i < t.n_files; i++)
                for (size_t k = 0; k < t.files[i].n_fns; k++)
                    fprintf(stderr, "%s:%d: %s%s %d lines\n", t.files[i].path, t.files[i].fns[k].line,
                            t.files[i].fns[k].is_static ? "static " : "", t.files[i].fns[k].name, t.files[i].fns[k].lines);
        if (!rc)
            fprintf(out, "layout ok: %zu files scanned, %zu functions, longest checked function %s (%s:%d) %d lines (limit %d)\n",
                    t.n_files, t.n_functions, t.longest ? t.longest->name : "-", t.longest ? t.longest_file->path : "-",
                    t.longest ? t.longest->line : 0, t.longest ? t.longest->lines : 0, MAX_FUNCTION_LINES);
    }
    tree_free(&t);
    return rc;
}

/* ------------------------------------------------------------------ self-test */

/* What each rule's message contains; the self-test insists that every one of them is expected
 * somewhere, so that emptying the expected files cannot make the self-test pass vacuously. */
static const char *const RULE_MARKS[] = {"must not include", "private header", "include cycle", "circle:", "(limit 80)"};

/* Runs one fake tree and compares its output with expected.txt (empty: a clean tree, whose
 * output must then be the one summary line). Returns 0 when they agree. */
static int selftest_case(const char *dir, const char *name, int *marks, int *clean)
{
    char *root = xprintf("%s/%s", dir, name), *exp_path = xprintf("%s/expected.txt", root);
    char *expected = read_whole(exp_path), *got = NULL;
    size_t got_len = 0;
    FILE *mem = open_memstream(&got, &got_len);
    if (!mem) exit(2);
    long rc = check_tree(root, mem, 0);
    fclose(mem);
    int fail = 0;
    if (!expected) { printf("FAIL %s: no %s\n", name, exp_path); fail = 1; }
    else if (!*expected) {
        fail = rc != 0 || strncmp(got, "layout ok:", 10);
        *clean += !fail;
    } else {
        fail = rc == 0 || strcmp(got, expected);
        for (size_t k = 0; k < sizeof RULE_MARKS / sizeof *RULE_MARKS; k++) marks[k] |= strstr(expected, RULE_MARKS[k]) != NULL;
    }
    if (fail && expected)
        printf("FAIL %s (exit %ld)\n--- expected\n%s--- got\n%s---\n", name, rc, *expected ? expected : "(clean tree)\n", got);
    else if (!fail) printf("ok   %s: %ld violation(s)\n", name, rc);
    free(root); free(exp_path); free(expected); free(got);
    return fail;
}

static int selftest(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "check_layout: cannot open %s\n", dir); return 2; }
    strvec cases = {0};
    for (struct dirent *e; (e = readdir(d));) {
        char *p = xprintf("%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && is_dir(p)) sv_push(&cases, xstrndup(e->d_name, strlen(e->d_name)));
        free(p);
    }
    closedir(d);
    sv_uniq(&cases);
    int failures = 0, clean = 0, marks[sizeof RULE_MARKS / sizeof *RULE_MARKS] = {0};
    for (size_t i = 0; i < cases.n; i++) failures += selftest_case(dir, cases.v[i], marks, &clean);
    if (!clean) { printf("FAIL: no clean tree among the cases\n"); failures++; }
    for (size_t k = 0; k < sizeof RULE_MARKS / sizeof *RULE_MARKS; k++)
        if (!marks[k]) { printf("FAIL: no case expects a \"%s\" violation\n", RULE_MARKS[k]); failures++; }
    printf("selftest: %zu cases, %d failure(s)\n", cases.n, failures);
    sv_free(&cases);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--selftest")) return selftest(argv[2]);
    int list = argc == 3 && !strcmp(argv[1], "--functions"); /* also lists every function on stderr */
    if (argc != 2 && !list) {
        fprintf(stderr, "usage: check_layout [--functions] SRC_DIR | check_layout --selftest CASES_DIR\n");
        return 2;
    }
    long rc = check_tree(argv[argc - 1], stdout, list);
    if (rc > 0) fprintf(stderr, "layout: %ld violation(s) under %s\n", rc, argv[argc - 1]);
    return rc < 0 ? 2 : rc > 0 ? 1 : 0;
}
