#include <string.h>
#include <unistd.h>
#include "cli/progress.h"

static double elapsed(const progress *p)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - p->start.tv_sec) + (t.tv_nsec - p->start.tv_nsec) * 1e-9;
}

void progress_init(progress *p, FILE *out, int mode, double every, const char *label, int max_new)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = isatty(fileno(out));
    p->on = mode < 0 ? p->tty : mode;
    p->every = every > 0 ? every : p->tty ? 0.5 : 30;
    p->label = label;
    p->max_new = max_new;
    p->last_draw = -1e9;
    p->decode_start = -1;
    clock_gettime(CLOCK_MONOTONIC, &p->start);
}

void progress_format_duration(double s, char *buf, size_t n)
{
    if (!(s >= 0) || s > 1e8) { snprintf(buf, n, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

static void emit_line(progress *p, const char *line)
{
    const char *label = p->label ? p->label : "";
    if (p->tty) {
        fprintf(p->out, "\r\033[K[%s%s%s] %s", label, p->label ? " " : "", "dsspec", line);
        p->drawn = 1;
    } else {
        fprintf(p->out, "[%s%sdsspec] %s\n", label, p->label ? " " : "", line);
    }
    fflush(p->out);
}

/* Due: the interval passed since the last line (always, for the last prefill row). */
static int due(progress *p, double now, int force)
{
    if (!p->on || (!force && now - p->last_draw < p->every)) return 0;
    p->last_draw = now;
    return 1;
}

void progress_prefill(progress *p, int done, int n)
{
    double now = elapsed(p);
    if (!due(p, now, done == n && !p->tty)) return;
    char eta[32], line[256];
    double rate = now > 0 ? done / now : 0;
    progress_format_duration(rate > 0 ? (n - done) / rate : -1, eta, sizeof eta);
    snprintf(line, sizeof line, "prefill %d/%d prompt rows | %.1f rows/s | ETA %s", done, n, rate, eta);
    emit_line(p, line);
}

/* Tokens per second over the last PROGRESS_WINDOW samples. */
static double recent_rate(progress *p, double now, int generated)
{
    int k = p->win_n % PROGRESS_WINDOW;
    p->win_t[k] = now;
    p->win_g[k] = generated;
    p->win_n++;
    int oldest = p->win_n >= PROGRESS_WINDOW ? p->win_n % PROGRESS_WINDOW : 0;
    double dt = now - p->win_t[oldest];
    return dt > 0 ? (generated - p->win_g[oldest]) / dt : 0;
}

void progress_step(progress *p, dsspec *e, const dsspec_gen_stats *live)
{
    if (!p->on) return;
    double now = elapsed(p);
    if (p->decode_start < 0) { p->decode_start = now; p->decode_from = live->generated; }
    double recent = recent_rate(p, now, live->generated);
    if (!due(p, now, 0)) return;
    double avg = now > p->decode_start ? (live->generated - p->decode_from) / (now - p->decode_start) : 0;
    char eta[32], line[512];
    progress_format_duration(avg > 0 ? (p->max_new - live->generated) / avg : -1, eta, sizeof eta);
    int n = snprintf(line, sizeof line, "%d/%d tokens | %.2f tok/s (recent %.2f) | ETA %s", live->generated, p->max_new,
                     avg, recent, eta);
    dsspec_cache_counters c;
    if (dsspec_get_cache_counters(e, &c) == 0) {
        double req = (double)c.hits + c.misses;
        n += snprintf(line + n, sizeof line - n, " | hit %.1f%% | %.2f GB read | stall %.0f%%", req > 0 ? 100 * c.hits / req : 0,
                      c.bytes_read / 1e9, now > 0 ? 100 * c.stall_ns * 1e-9 / now : 0);
    }
    if (live->drafts > 0)
        snprintf(line + n, sizeof line - n, " | MTP %.0f%% accepted", 100.0 * live->accepted / live->drafts);
    emit_line(p, line);
}

void progress_end(progress *p)
{
    if (p->drawn) { fputc('\n', p->out); fflush(p->out); }
    p->drawn = 0;
}
