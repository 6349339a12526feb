/* Session files: a generation that survives kill -9, the OOM killer or a reboot.
 *
 * The file is a sequence of records, each
 *     u32 magic "DSSR" | u32 type | u64 payload bytes | payload | u32 CRC-32 of type, length, payload
 * appended and never rewritten:
 *   HEADER     once, first: format version, checkpoint identity (FNV-1a of config.json and the
 *              safetensors index), every setting that changes the output (prompt ids, temperature,
 *              top-p, top-k, min-p, seed, MTP, KV dtype, ctx, EOS handling, kernel path) and the KV
 *              geometry.
 *   CHECKPOINT at every step boundary of the decode loop (and after each non-final prefill chunk):
 *              the loop's state (gen_checkpoint: position, last token, MTP draft, sampler state,
 *              counters, which MTP rows are valid), the tokens generated since the previous
 *              record, the main latent KV rows that became final since it ([previous len, len))
 *              and the MTP rows written since it ([mtp_new, mtp_to): --mtp auto leaves holes, and
 *              writes a row that waited after the boundary that made its position final).
 *   FINAL      when generation ends by EOS, -n or a full context: why, and the tokens after the
 *              last CHECKPOINT.
 * Reading stops at the first record that is short (a write torn by a kill) or fails its CRC or
 * its sequence checks (a flipped bit): everything before it is a consistent state, everything from
 * it on is dropped and the file truncated there, and the run continues from the last good
 * CHECKPOINT. Dropping rather than refusing is exact, because later records only extend earlier
 * ones: the loop recomputes what was dropped, bit for bit, and loses only time.
 *
 * Durability: a process kill loses nothing written (the page cache survives it); a power loss or
 * kernel crash loses what was not yet fsync'ed. fsync runs after every prefill chunk (each costs
 * minutes at R1 scale), after every sync_every generated tokens, and at the end. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/engine_internal.h"

#define SESSION_MAGIC 0x52535344u /* "DSSR" little-endian */
#define SESSION_VERSION 3
enum { REC_HEADER = 1, REC_CHECKPOINT = 2, REC_FINAL = 3 };

typedef struct {
    uint64_t model_hash, seed;
    double temperature, top_p;
    int32_t mtp, kv_bf16, ctx, eos_id, kernel_path, n_layers, latent_dim, rope_dim, n_prompt;
    int32_t top_k;
    double min_p;
} session_settings;
/* Written as its bytes: no padding that could carry stray bytes into the file. */
_Static_assert(sizeof(session_settings) == 4 * 8 + 10 * 4 + 8, "session_settings has padding");

typedef struct {
    int64_t kv_offset;            /* file offset of the record's KV rows */
    int32_t from, len;            /* main KV rows [from, len) */
    int32_t mtp_from, mtp_to;     /* then MTP KV rows [mtp_from, mtp_to) */
} kv_extent;

struct dsspec_session {
    char path[1024];
    int fd, sync_every, bound;
    uint64_t model_hash;
    session_settings hdr;         /* the file's header (valid when has_header) */
    int has_header;
    uint32_t other_version;  /* a whole header record of another format version was read */
    int *prompt;                  /* the header's prompt ids */
    kv_extent *extents;           /* one per CHECKPOINT, in order */
    int n_extents, cap_extents;
    gen_checkpoint last;          /* the last CHECKPOINT's state (valid when n_extents > 0) */
    int *tokens;                  /* tokens up to the last CHECKPOINT, then what this run adds */
    int n_tokens, cap_tokens;
    int recorded_tokens;          /* tokens covered by records */
    int final_reason, final_tail; /* -1 when the last record is not a FINAL; tail = its token count */
    int synced_at;                /* generated count at the last fsync */
    int elt;                      /* bytes per KV element */
    int lost_tokens;              /* a token could not be stored (out of memory) */
};

/* ------------------------------------------------------------------ checksums, identity */

static uint32_t crc32_update(uint32_t crc, const void *data, size_t n)
{
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    const unsigned char *p = data;
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n--) h = (h ^ *p++) * 0x100000001b3ull;
    return h;
}

/* config.json and the safetensors index name the checkpoint: a different model, a different
 * shard layout or a re-quantised copy changes one of them. */
static int model_identity(const char *dir, uint64_t *hash, char *err, size_t errlen)
{
    static const char *names[] = {"config.json", "model.safetensors.index.json"};
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 2; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = text_file_read(path, &len, err, errlen);
        if (!text && i == 0) return -1;
        h = fnv1a(h, names[i], strlen(names[i]));
        if (text) h = fnv1a(h, text, len);
        free(text);
    }
    *hash = h;
    return 0;
}

/* ------------------------------------------------------------------ writing */

static int write_all(dsspec_session *s, const void *data, size_t n, uint32_t *crc, char *err, size_t errlen)
{
    const char *p = data;
    if (crc) *crc = crc32_update(*crc, data, n);
    while (n > 0) {
        ssize_t w = write(s->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { error_set(err, errlen, "session %s: write failed: %s", s->path, strerror(errno)); return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The record's first 16 bytes; *crc starts the checksum over type and length. */
static int write_record_head(dsspec_session *s, uint32_t type, uint64_t len, uint32_t *crc, char *err, size_t errlen)
{
    uint32_t magic = SESSION_MAGIC;
    *crc = 0;
    if (write_all(s, &magic, 4, NULL, err, errlen)) return -1;
    if (write_all(s, &type, 4, crc, err, errlen)) return -1;
    return write_all(s, &len, 8, crc, err, errlen);
}

static int sync_file(dsspec_session *s, char *err, size_t errlen)
{
    if (fsync(s->fd) == 0) return 0;
    error_set(err, errlen, "session %s: fsync failed: %s", s->path, strerror(errno));
    return -1;
}

static int write_header(dsspec_session *s, char *err, size_t errlen)
{
    uint32_t crc, version = SESSION_VERSION;
    uint64_t len = 4 + sizeof s->hdr + (uint64_t)s->hdr.n_prompt * 4;
    if (write_record_head(s, REC_HEADER, len, &crc, err, errlen) || write_all(s, &version, 4, &crc, err, errlen) ||
        write_all(s, &s->hdr, sizeof s->hdr, &crc, err, errlen) ||
        write_all(s, s->prompt, (size_t)s->hdr.n_prompt * 4, &crc, err, errlen) || write_all(s, &crc, 4, NULL, err, errlen))
        return -1;
    return sync_file(s, err, errlen);
}

static size_t kv_row_bytes(const dsspec_session *s, int n_layers, int rows)
{
    return (size_t)n_layers * rows * (size_t)(s->hdr.latent_dim + s->hdr.rope_dim) * s->elt;
}

/* Rows [from, len) of every layer of kv: latent rows, then k_rope rows, layer by layer. */
static int write_kv_rows(dsspec_session *s, const kv_cache *kv, int from, int len, uint32_t *crc, char *err, size_t errlen)
{
    size_t lat = (size_t)kv->latent_dim * s->elt, rope = (size_t)kv->rope_dim * s->elt;
    for (int l = 0; l < kv->n_layers; l++) {
        const char *a = (const char *)kv->latent + ((size_t)l * kv->ctx + from) * lat;
        const char *b = (const char *)kv->krope + ((size_t)l * kv->ctx + from) * rope;
        if (write_all(s, a, lat * (len - from), crc, err, errlen) || write_all(s, b, rope * (len - from), crc, err, errlen))
            return -1;
    }
    return 0;
}

static int push_extent(dsspec_session *s, int64_t off, int from, int len, int mtp_from, int mtp_to)
{
    if (s->n_extents == s->cap_extents) {
        int cap = s->cap_extents ? 2 * s->cap_extents : 64;
        kv_extent *x = realloc(s->extents, (size_t)cap * sizeof *x);
        if (!x) return -1;
        s->extents = x;
        s->cap_extents = cap;
    }
    s->extents[s->n_extents++] = (kv_extent){off, from, len, mtp_from, mtp_to};
    return 0;
}

static int push_token(dsspec_session *s, int t)
{
    if (s->n_tokens == s->cap_tokens) {
        int cap = s->cap_tokens ? 2 * s->cap_tokens : 256;
        int *x = realloc(s->tokens, (size_t)cap * sizeof *x);
        if (!x) return -1;
        s->tokens = x;
        s->cap_tokens = cap;
    }
    s->tokens[s->n_tokens++] = t;
    return 0;
}

/* The fixed part of a CHECKPOINT payload, then tokens, then main KV rows [kv_from, len), then MTP
 * KV rows [mtp_new, mtp_to). */
typedef struct {
    int32_t len, prefill_done, last, draft;
    uint64_t rng;
    int32_t generated, main_passes, drafts, accepted;
    int32_t tok_from, n_tok, kv_from, mtp_new;
    int32_t mtp_from, mtp_to;
} checkpoint_fixed;
_Static_assert(sizeof(checkpoint_fixed) == 64, "checkpoint_fixed has padding");

/* Bytes of a CHECKPOINT's KV rows: main rows over every layer, MTP rows over its one. */
static uint64_t record_kv_bytes(const dsspec_session *s, const checkpoint_fixed *f)
{
    return kv_row_bytes(s, s->hdr.n_layers, f->len - f->kv_from) + (s->hdr.mtp ? kv_row_bytes(s, 1, f->mtp_to - f->mtp_new) : 0);
}

int session_on_checkpoint(void *ctx, const gen_checkpoint *cp, const kv_cache *kv, const kv_cache *mtp_kv, char *err,
                          size_t errlen)
{
    dsspec_session *s = ctx;
    int kv_from = s->n_extents ? s->last.len : 0;
    if (s->lost_tokens || cp->generated != s->n_tokens) {
        error_set(err, errlen, "session %s: out of memory for the token list", s->path);
        return -1;
    }
    int mtp = s->hdr.mtp && mtp_kv;
    checkpoint_fixed f = {cp->len, cp->prefill_done, cp->last, cp->draft, cp->rng, cp->generated, cp->main_passes,
                          cp->drafts, cp->accepted, s->recorded_tokens, cp->generated - s->recorded_tokens, kv_from,
                          mtp ? cp->mtp_new : 0, mtp ? cp->mtp_from : 0, mtp ? cp->mtp_to : 0};
    uint64_t len = sizeof f + (uint64_t)f.n_tok * 4 + record_kv_bytes(s, &f);
    uint32_t crc;
    off_t start = lseek(s->fd, 0, SEEK_END);
    if (write_record_head(s, REC_CHECKPOINT, len, &crc, err, errlen) || write_all(s, &f, sizeof f, &crc, err, errlen) ||
        write_all(s, s->tokens + f.tok_from, (size_t)f.n_tok * 4, &crc, err, errlen) ||
        write_kv_rows(s, kv, kv_from, cp->len, &crc, err, errlen) ||
        (mtp && write_kv_rows(s, mtp_kv, f.mtp_new, f.mtp_to, &crc, err, errlen)) || write_all(s, &crc, 4, NULL, err, errlen))
        return -1;
    if (push_extent(s, start + 16 + (int64_t)sizeof f + (int64_t)f.n_tok * 4, kv_from, cp->len, f.mtp_new, f.mtp_to)) {
        error_set(err, errlen, "out of memory");
        return -1;
    }
    s->last = *cp;
    s->last.mtp_from = f.mtp_from;
    s->last.mtp_to = f.mtp_to;
    s->last.mtp_new = f.mtp_new;
    s->recorded_tokens = cp->generated;
    s->final_reason = -1;
    int prefill = cp->prefill_done < s->hdr.n_prompt;
    if (prefill || (s->sync_every > 0 && cp->generated - s->synced_at >= s->sync_every)) {
        s->synced_at = cp->generated;
        return sync_file(s, err, errlen);
    }
    return 0;
}

void session_note_token(dsspec_session *s, int token)
{
    if (push_token(s, token)) s->lost_tokens = 1;
}

int session_finish(dsspec_session *s, dsspec_stop_reason why, char *err, size_t errlen)
{
    if (why == DSSPEC_STOP_EOS || why == DSSPEC_STOP_MAX_TOKENS || why == DSSPEC_STOP_CTX_FULL) {
        int32_t body[3] = {(int32_t)why, s->n_tokens, s->n_tokens - s->recorded_tokens};
        uint32_t crc;
        if (write_record_head(s, REC_FINAL, sizeof body + (uint64_t)body[2] * 4, &crc, err, errlen) ||
            write_all(s, body, sizeof body, &crc, err, errlen) ||
            write_all(s, s->tokens + s->recorded_tokens, (size_t)body[2] * 4, &crc, err, errlen) ||
            write_all(s, &crc, 4, NULL, err, errlen))
            return -1;
        s->final_reason = why;
        s->final_tail = body[2];
    }
    return sync_file(s, err, errlen);
}

/* ------------------------------------------------------------------ reading */

static int read_at(int fd, int64_t off, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        off += r;
        n -= (size_t)r;
    }
    return 0;
}

/* CRC of n bytes at off, read in bounded pieces (a prefill chunk's rows can be megabytes). */
static int crc_range(int fd, int64_t off, uint64_t n, uint32_t *crc)
{
    char buf[1 << 14];
    while (n > 0) {
        size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
        if (read_at(fd, off, buf, k)) return -1;
        *crc = crc32_update(*crc, buf, k);
        off += (int64_t)k;
        n -= k;
    }
    return 0;
}

typedef struct {
    uint32_t type;
    uint64_t len;
    int64_t off;                  /* of the payload */
    size_t head_len;              /* payload bytes read into memory */
} record;

/* The record at off when it is whole and its CRC holds; *head_len bytes of its payload are read
 * into a malloc'd *head (the rest only checksummed). 0 ok, -1 torn or damaged. */
static int read_record(int fd, int64_t off, int64_t size, size_t head_max, record *r, char **head)
{
    uint32_t h[4], stored;
    *head = NULL;
    if (size - off < 20 || read_at(fd, off, h, 16) || h[0] != SESSION_MAGIC) return -1;
    r->type = h[1];
    memcpy(&r->len, &h[2], 8);
    r->off = off + 16;
    if (r->len > (uint64_t)(size - off - 20)) return -1;
    uint32_t crc = crc32_update(0, &h[1], 12);
    size_t hl = r->len < head_max ? (size_t)r->len : head_max;
    r->head_len = hl;
    if (!(*head = malloc(hl + 1))) return -1;
    if (read_at(fd, r->off, *head, hl)) goto bad;
    crc = crc32_update(crc, *head, hl);
    if (crc_range(fd, r->off + (int64_t)hl, r->len - hl, &crc) || read_at(fd, r->off + (int64_t)r->len, &stored, 4) || stored != crc)
        goto bad;
    return 0;
bad:
    free(*head);
    *head = NULL;
    return -1;
}

/* Bounds a header written by this code always meets; the KV geometry is multiplied into record
 * sizes before any checkpoint is compared with the run, so it must not overflow. */
static int header_plausible(const session_settings *h)
{
    return h->n_layers >= 1 && h->n_layers <= 4096 && h->latent_dim >= 1 && h->latent_dim <= 65536 && h->rope_dim >= 0 &&
           h->rope_dim <= 65536 && h->ctx >= 2 && h->ctx <= (1 << 24) && h->n_prompt >= 1 && h->n_prompt < h->ctx &&
           h->mtp >= 0 && h->mtp <= 2 && (h->kv_bf16 == 0 || h->kv_bf16 == 1) && h->top_k >= 0 && h->min_p >= 0 &&
           h->min_p <= 1;
}

static int apply_header(dsspec_session *s, const char *p, uint64_t len)
{
    uint32_t version;
    if (len < 4) return -1;
    memcpy(&version, p, 4);
    if (version != SESSION_VERSION) {
        s->other_version = version;
        return -1;
    }
    if (len < 4 + sizeof s->hdr) return -1;
    memcpy(&s->hdr, p + 4, sizeof s->hdr);
    if ( !header_plausible(&s->hdr) || len != 4 + sizeof s->hdr + (uint64_t)s->hdr.n_prompt * 4)
        return -1;
    if (!(s->prompt = malloc((size_t)s->hdr.n_prompt * 4 + 1))) return -1;
    memcpy(s->prompt, p + 4 + sizeof s->hdr, (size_t)s->hdr.n_prompt * 4);
    s->elt = s->hdr.kv_bf16 ? 2 : 4;
    s->has_header = 1;
    return 0;
}

/* What every boundary the decode loop reports satisfies (speculate/generate.c): in prefill, the KV
 * holds exactly the prompt rows done and nothing is generated; in decode, it holds the prompt and
 * every generated token but the last, which is f->last; counters never exceed what was generated.
 * A record that breaks this was not written by the loop: it is treated like a damaged one. */
static int boundary_consistent(const dsspec_session *s, const checkpoint_fixed *f)
{
    if (f->prefill_done < 0) return 0;
    if (f->prefill_done < s->hdr.n_prompt)
        return f->len == f->prefill_done && f->last == -1 && f->draft == -1 && f->generated == 0 && f->main_passes == 0 &&
               f->drafts == 0 && f->accepted == 0;
    return f->generated >= 1 && f->len == s->hdr.n_prompt + f->generated - 1 && f->last == s->tokens[f->generated - 1] &&
           f->last >= 0 && f->draft >= -1 && f->accepted >= 0 && f->accepted <= f->drafts && f->drafts <= f->main_passes &&
           f->main_passes <= f->generated;
}

/* The MTP rows a record says are valid: within the KV, and either starting with the rows it
 * carries (after a hole, or the first) or the previous record's valid rows extended by them. */
static int mtp_rows_consistent(const dsspec_session *s, const checkpoint_fixed *f)
{
    int prev_from = s->n_extents ? s->last.mtp_from : 0, prev_to = s->n_extents ? s->last.mtp_to : 0;
    if (!s->hdr.mtp) return f->mtp_from == 0 && f->mtp_new == 0 && f->mtp_to == 0;
    return 0 <= f->mtp_from && f->mtp_from <= f->mtp_new && f->mtp_new <= f->mtp_to && f->mtp_to <= f->len &&
           (f->mtp_from == f->mtp_new || (f->mtp_from == prev_from && f->mtp_new == prev_to));
}

static int apply_checkpoint(dsspec_session *s, const char *p, const record *r)
{
    checkpoint_fixed f;
    if (r->len < sizeof f) return -1;
    memcpy(&f, p, sizeof f);
    int kv_from = s->n_extents ? s->last.len : 0;
    if (f.kv_from != kv_from || f.len < kv_from || f.tok_from != s->recorded_tokens || f.n_tok < 0 ||
        sizeof f + (uint64_t)f.n_tok * 4 > r->head_len || f.generated != f.tok_from + f.n_tok ||
        f.prefill_done > s->hdr.n_prompt || f.len > s->hdr.ctx || !mtp_rows_consistent(s, &f) ||
        r->len != sizeof f + (uint64_t)f.n_tok * 4 + record_kv_bytes(s, &f))
        return -1;
    int had = s->n_tokens;
    s->n_tokens = s->recorded_tokens; /* a FINAL before this record no longer ends the run */
    for (int i = 0; i < f.n_tok; i++) {
        int32_t t;
        memcpy(&t, p + sizeof f + 4 * (size_t)i, 4);
        if (push_token(s, t)) { s->n_tokens = had; return -1; }
    }
    if (!boundary_consistent(s, &f)) {
        s->n_tokens = had; /* the state before this record stands, a FINAL's tokens included */
        return -1;
    }
    if (push_extent(s, r->off + (int64_t)sizeof f + 4 * (int64_t)f.n_tok, kv_from, f.len, f.mtp_new, f.mtp_to)) return -1;
    s->last = (gen_checkpoint){f.len, f.prefill_done, f.last, f.draft, f.rng, f.generated, f.main_passes, f.drafts, f.accepted,
                               f.mtp_from, f.mtp_to, f.mtp_new};
    s->recorded_tokens = f.generated;
    s->final_reason = -1;
    return 0;
}

static int apply_final(dsspec_session *s, const char *p, uint64_t len)
{
    int32_t body[3];
    if (len < sizeof body) return -1;
    memcpy(body, p, sizeof body);
    if (body[2] < 0 || len != sizeof body + (uint64_t)body[2] * 4 || body[1] != s->recorded_tokens + body[2] ||
        body[0] < 0 || body[0] > DSSPEC_STOP_CTX_FULL)
        return -1;
    int had = s->n_tokens;
    s->n_tokens = s->recorded_tokens;
    for (int i = 0; i < body[2]; i++) {
        int32_t t;
        memcpy(&t, p + sizeof body + 4 * (size_t)i, 4);
        if (push_token(s, t)) { s->n_tokens = had; return -1; }
    }
    s->final_reason = body[0];
    s->final_tail = body[2];
    return 0;
}

/* Reads every good record; returns the offset where the good part ends (-1: no valid header). */
static int64_t scan(dsspec_session *s, int64_t size)
{
    int64_t off = 0;
    while (off < size) {
        record r;
        char *head;
        size_t head_max = s->has_header ? sizeof(checkpoint_fixed) + (4u << 20) : (size_t)-1 / 2;
        if (read_record(s->fd, off, size, head_max, &r, &head)) break;
        int bad;
        if (!s->has_header) bad = r.type != REC_HEADER || apply_header(s, head, r.len);
        else if (r.type == REC_CHECKPOINT) bad = apply_checkpoint(s, head, &r);
        else bad = r.type != REC_FINAL || r.head_len != r.len || apply_final(s, head, r.len);
        free(head);
        if (bad) break;
        off = r.off + (int64_t)r.len + 4;
    }
    return s->has_header ? off : -1;
}

/* ------------------------------------------------------------------ opening and binding */

void dsspec_session_close(dsspec_session *s)
{
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    free(s->prompt);
    free(s->extents);
    free(s->tokens);
    free(s);
}

/* The file ends inside its first record: a header write cut short (not a damaged one). */
static int header_torn(int fd, int64_t size)
{
    uint32_t h[4];
    uint64_t len;
    if (size < 16) return 1;
    if (read_at(fd, 0, h, 16) || h[0] != SESSION_MAGIC || h[1] != REC_HEADER) return 0;
    memcpy(&len, &h[2], 8);
    return len < (1ull << 40) && (uint64_t)size < 20 + len;
}

/* An existing file: its good records read, a torn or damaged tail cut off (noted). */
static int load_existing(dsspec_session *s, int64_t size, char *note, size_t notelen, char *err, size_t errlen)
{
    int64_t end = scan(s, size);
    if (end < 0 && header_torn(s->fd, size)) {
        /* Killed while writing the header: nothing was recorded yet, so the run starts afresh. */
        if (ftruncate(s->fd, 0)) { error_set(err, errlen, "session %s: %s", s->path, strerror(errno)); return -1; }
        if (note) snprintf(note, notelen, "session %s: its header was torn by a kill; starting the run afresh", s->path);
        return 0;
    }
    if (end < 0 && s->other_version) {
        error_set(err, errlen, "session %s has session format %u; this dsspec reads format %d (start the run afresh)",
                  s->path, s->other_version, SESSION_VERSION);
        return -1;
    }
    if (end < 0) {
        error_set(err, errlen, "session %s: not a dsspec session file, or its header is damaged", s->path);
        return -1;
    }
    if (s->hdr.model_hash != s->model_hash) {
        error_set(err, errlen, "session %s was made with a different checkpoint (its config.json or safetensors index differ)", s->path);
        return -1;
    }
    if (end < size) {
        if (ftruncate(s->fd, end) || fsync(s->fd)) {
            error_set(err, errlen, "session %s: cannot cut off its damaged tail: %s", s->path, strerror(errno));
            return -1;
        }
        if (note)
            snprintf(note, notelen, "session %s: dropped %lld bytes of a torn or damaged tail; continuing from token %d",
                     s->path, (long long)(size - end), s->recorded_tokens);
    }
    return 0;
}

dsspec_session *dsspec_session_open(const char *path, const char *model_dir, int resume, int sync_every, char *note,
                                    size_t notelen, char *err, size_t errlen)
{
    if (note && notelen) note[0] = 0;
    dsspec_session *s = calloc(1, sizeof *s);
    if (!s) { error_set(err, errlen, "out of memory"); return NULL; }
    snprintf(s->path, sizeof s->path, "%s", path);
    s->sync_every = sync_every;
    s->final_reason = -1;
    s->fd = open(path, O_RDWR | O_CREAT | (resume ? 0 : O_EXCL) | O_CLOEXEC, 0644);
    struct stat st;
    if (s->fd < 0) {
        if (errno == EEXIST) error_set(err, errlen, "session %s already exists: add --resume to continue it, or remove it", path);
        else error_set(err, errlen, "session %s: cannot open for writing: %s", path, strerror(errno));
        goto fail;
    }
    if (fstat(s->fd, &st)) { error_set(err, errlen, "session %s: %s", path, strerror(errno)); goto fail; }
    if (model_identity(model_dir ? model_dir : dsspec_default_model_dir(), &s->model_hash, err, errlen)) goto fail;
    if (st.st_size > 0 && load_existing(s, st.st_size, note, notelen, err, errlen)) goto fail;
    if (lseek(s->fd, 0, SEEK_END) < 0) { error_set(err, errlen, "session %s: %s", path, strerror(errno)); goto fail; }
    s->synced_at = s->recorded_tokens;
    return s;
fail:
    dsspec_session_close(s);
    return NULL;
}

int dsspec_session_tokens(const dsspec_session *s, const int **ids)
{
    if (ids) *ids = s->tokens;
    return s->n_tokens;
}

static const char *mtp_name(int mtp)
{
    return mtp == 2 ? "auto" : mtp ? "on" : "off";
}

/* The first setting of the file's header that this run changes, as "--flag was X, now Y". */
static int settings_differ(const session_settings *a, const session_settings *b, char *what, size_t n)
{
    if (a->n_layers != b->n_layers || a->latent_dim != b->latent_dim || a->rope_dim != b->rope_dim)
        snprintf(what, n, "a checkpoint of another shape");
    else if (a->mtp != b->mtp) snprintf(what, n, "--mtp %s (this run: %s)", mtp_name(a->mtp), mtp_name(b->mtp));
    else if (a->kv_bf16 != b->kv_bf16) snprintf(what, n, "--kv-dtype %s (this run: %s)", a->kv_bf16 ? "bf16" : "f32", b->kv_bf16 ? "bf16" : "f32");
    else if (a->ctx != b->ctx) snprintf(what, n, "--ctx %d (this run: %d)", a->ctx, b->ctx);
    else if (a->eos_id != b->eos_id) snprintf(what, n, "EOS id %d (this run: %d; --ignore-eos differs)", a->eos_id, b->eos_id);
    else if (a->temperature != b->temperature) snprintf(what, n, "--temp %g (this run: %g)", a->temperature, b->temperature);
    else if (a->top_p != b->top_p) snprintf(what, n, "--top-p %g (this run: %g)", a->top_p, b->top_p);
    else if (a->top_k != b->top_k) snprintf(what, n, "--top-k %d (this run: %d)", a->top_k, b->top_k);
    else if (a->min_p != b->min_p) snprintf(what, n, "--min-p %g (this run: %g)", a->min_p, b->min_p);
    else if (a->seed != b->seed) snprintf(what, n, "--seed %llu (this run: %llu)", (unsigned long long)a->seed, (unsigned long long)b->seed);
    else if (a->kernel_path != b->kernel_path) snprintf(what, n, "another kernel path (--cpu-features)");
    else if (a->n_prompt != b->n_prompt) snprintf(what, n, "a prompt of %d tokens (this run: %d)", a->n_prompt, b->n_prompt);
    else return 0;
    return 1;
}

/* Token ids pass the CRC whatever they are; the model's vocabulary is known only now. A session
 * whose ids (output so far, the token to feed next, the draft) leave it is refused before any id
 * reaches the embedding table or the detokenizer. */
static int tokens_in_vocabulary(const dsspec_session *s, int vocab, char *err, size_t errlen)
{
    for (int i = 0; i < s->n_tokens; i++)
        if (s->tokens[i] < 0 || s->tokens[i] >= vocab) {
            error_set(err, errlen, "session %s: generated token %d is id %d, outside this checkpoint's vocabulary [0, %d): the file is damaged",
                      s->path, i, s->tokens[i], vocab);
            return -1;
        }
    if (s->n_extents && (s->last.last >= vocab || s->last.draft >= vocab)) {
        error_set(err, errlen, "session %s: its resume point feeds id %d (draft %d), outside this checkpoint's vocabulary [0, %d): the file is damaged",
                  s->path, s->last.last, s->last.draft, vocab);
        return -1;
    }
    return 0;
}

/* 0 when this generation matches the file's header (or there is none yet), else -1 with err. */
static int session_compare(const dsspec_session *s, const session_settings *cur, const int *prompt, int n, int vocab,
                           char *err, size_t errlen)
{
    char what[200];
    if (!s->has_header) return 0;
    if (tokens_in_vocabulary(s, vocab, err, errlen)) return -1;
    int differ = settings_differ(&s->hdr, cur, what, sizeof what);
    if (!differ && memcmp(s->prompt, prompt, (size_t)n * sizeof *prompt)) {
        snprintf(what, sizeof what, "a different prompt");
        differ = 1;
    }
    if (differ)
        error_set(err, errlen, "session %s was made with %s: resuming needs the same prompt and output-changing flags", s->path, what);
    return differ ? -1 : 0;
}

static session_settings settings_of(const dsspec_session *s, const dsspec *e, int n, const gen_options *g,
                                    const session_sampling *smp)
{
    const model_config *c = model_get_config(e->m);
    return (session_settings){s->model_hash, smp->seed, smp->temperature, smp->top_p, g->mtp, g->kv_bf16, g->ctx, g->eos_id,
                              (int32_t)kernels_path(), c->num_hidden_layers, c->kv_lora_rank, c->qk_rope_head_dim, n,
                              smp->top_k, smp->min_p};
}

int session_check(const dsspec_session *s, const dsspec *e, const int *prompt, int n, const gen_options *g,
                  const session_sampling *smp, char *err, size_t errlen)
{
    session_settings cur = settings_of(s, e, n, g, smp);
    return session_compare(s, &cur, prompt, n, model_get_config(e->m)->vocab_size, err, errlen);
}

int session_bind(dsspec_session *s, const dsspec *e, const int *prompt, int n, const gen_options *g,
                 const session_sampling *smp, char *err, size_t errlen)
{
    session_settings cur = settings_of(s, e, n, g, smp);
    if (s->bound) { error_set(err, errlen, "session %s: already used by a generation", s->path); return -1; }
    s->bound = 1;
    if (s->has_header) return session_compare(s, &cur, prompt, n, model_get_config(e->m)->vocab_size, err, errlen);
    s->hdr = cur;
    s->elt = g->kv_bf16 ? 2 : 4;
    if (!(s->prompt = malloc((size_t)n * sizeof *prompt + 1))) { error_set(err, errlen, "out of memory"); return -1; }
    memcpy(s->prompt, prompt, (size_t)n * sizeof *prompt);
    s->has_header = 1;
    return write_header(s, err, errlen);
}

int session_replay(dsspec_session *s, int max_new, int *count)
{
    if (s->final_reason >= 0 && (s->final_reason != DSSPEC_STOP_MAX_TOKENS || s->n_tokens >= max_new)) {
        *count = s->n_tokens < max_new ? s->n_tokens : max_new;
        return s->n_tokens > max_new ? DSSPEC_STOP_MAX_TOKENS : s->final_reason;
    }
    s->n_tokens = s->recorded_tokens; /* the loop regenerates what followed the last CHECKPOINT */
    if (s->n_extents && s->last.generated >= max_new) {
        *count = max_new;
        return DSSPEC_STOP_MAX_TOKENS;
    }
    *count = s->n_extents ? s->last.generated : 0;
    return -1;
}

const gen_checkpoint *session_resume_point(const dsspec_session *s)
{
    return s->n_extents ? &s->last : NULL;
}

static int read_kv_rows(dsspec_session *s, kv_cache *kv, int64_t *off, int from, int len)
{
    size_t lat = (size_t)kv->latent_dim * s->elt, rope = (size_t)kv->rope_dim * s->elt;
    for (int l = 0; l < kv->n_layers; l++) {
        char *a = (char *)kv->latent + ((size_t)l * kv->ctx + from) * lat;
        char *b = (char *)kv->krope + ((size_t)l * kv->ctx + from) * rope;
        if (read_at(s->fd, *off, a, lat * (len - from))) return -1;
        *off += (int64_t)(lat * (len - from));
        if (read_at(s->fd, *off, b, rope * (len - from))) return -1;
        *off += (int64_t)(rope * (len - from));
    }
    return 0;
}

int session_restore_kv(void *ctx, kv_cache *kv, kv_cache *mtp_kv, char *err, size_t errlen)
{
    dsspec_session *s = ctx;
    for (int i = 0; i < s->n_extents; i++) {
        const kv_extent *x = &s->extents[i];
        int64_t off = x->kv_offset;
        if (read_kv_rows(s, kv, &off, x->from, x->len) ||
            (mtp_kv && s->hdr.mtp && read_kv_rows(s, mtp_kv, &off, x->mtp_from, x->mtp_to))) {
            error_set(err, errlen, "session %s: cannot read its KV rows: %s", s->path, strerror(errno));
            return -1;
        }
    }
    return 0;
}
