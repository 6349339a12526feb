/* Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (the kind DeepSeek-V3/R1 use),
 * giving the same ids and text as Hugging Face's tokenizers library, plus R1's chat template.
 *
 * Text in and out is UTF-8. Input that is not valid UTF-8 is first repaired exactly as Rust's
 * String::from_utf8_lossy (and a WHATWG decoder) does: each maximal invalid subsequence becomes
 * U+FFFD. Decoding applies the same rule to the byte stream the tokens spell.
 *
 * A tokenizer is read-only after loading except for its word cache and regex scratch, so one
 * tokenizer must not encode from two threads at once; decoding and lookups may run concurrently. */
#ifndef DSSPEC_TOKENIZER_H
#define DSSPEC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tokenizer tokenizer;
typedef struct tokenizer_stream tokenizer_stream;

/* path: a model directory holding tokenizer.json (+ optional tokenizer_config.json, which gives
 * add_bos_token, bos_token, eos_token and chat_template), or a tokenizer.json file (its
 * directory's tokenizer_config.json is then read if present). On failure returns NULL and writes
 * one line naming the file/field and what was expected into err. */
tokenizer *tokenizer_load(const char *path, char *err, size_t errlen);
void tokenizer_free(tokenizer *tok);

/* text[0..len) -> *ids (malloc'd, caller frees), *n_ids. add_bos: prepend the BOS id when the
 * tokenizer_config.json asks for it (add_bos_token) and names a bos_token. Returns 0, or -1 on
 * allocation failure. Added tokens (e.g. <｜User｜>, <think>) written in the text are recognised,
 * as Hugging Face's encode(..., add_special_tokens=False) does. */
int tokenizer_encode(tokenizer *tok, const char *text, size_t len, int add_bos, int32_t **ids, size_t *n_ids);

/* ids -> malloc'd NUL-terminated UTF-8 text (length in *len if len != NULL). Unknown ids are
 * dropped, like the reference. skip_special drops tokens flagged special (BOS, EOS, ...). */
char *tokenizer_decode(const tokenizer *tok, const int32_t *ids, size_t n_ids, int skip_special, size_t *len);

/* Streaming decode for generation: push one id at a time, print what comes back. Bytes of a UTF-8
 * character split across tokens are held until the character is complete, so the concatenation
 * of all pushes plus the final flush equals tokenizer_decode of all ids. Returned pointers stay
 * valid until the next call on the stream. */
tokenizer_stream *tokenizer_stream_create(const tokenizer *tok, int skip_special);
const char *tokenizer_stream_push(tokenizer_stream *st, int32_t id, size_t *len);
const char *tokenizer_stream_flush(tokenizer_stream *st, size_t *len);
void tokenizer_stream_free(tokenizer_stream *st);

/* Lookups. ids are -1 when absent. */
int32_t tokenizer_token_id(const tokenizer *tok, const char *content); /* added token or vocab entry */
const char *tokenizer_token_text(const tokenizer *tok, int32_t id);     /* as written in tokenizer.json */
const char *tokenizer_token_bytes(const tokenizer *tok, int32_t id, size_t *len); /* what it decodes to;
                                                       may be part of a UTF-8 character */
int tokenizer_is_special(const tokenizer *tok, int32_t id);
int32_t tokenizer_bos_id(const tokenizer *tok);
int32_t tokenizer_eos_id(const tokenizer *tok);
int tokenizer_adds_bos(const tokenizer *tok);
size_t tokenizer_vocab_size(const tokenizer *tok); /* highest id + 1 */

/* Renders DeepSeek-R1's chat template (implemented in C, same output as its Jinja source) for a
 * JSON array of OpenAI-style messages: {"role": "system"|"user"|"assistant"|"tool", "content":
 * string|null, "tool_calls": [{"type", "function": {"name", "arguments": string}}]}.
 * add_generation_prompt appends "<｜Assistant｜><think>\n". The result starts with the BOS text, so
 * encode it with add_bos = 0. Returns malloc'd text, or NULL with one line in err. */
char *tokenizer_render_chat(const tokenizer *tok, const char *messages_json, int add_generation_prompt,
                            char *err, size_t errlen);

#endif
