#!/bin/sh
# The committed tokenizer/unicode_delta.c must be what gen_unicode_delta.js makes from this
# machine's PCRE2 and the reference (so the widened categories are the reference's, not guesses).
# usage: check_delta.sh PCRE2_CATEGORIES_BINARY OUT_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
"$1" >"$2/pcre2_categories.txt"
node "$here/gen_unicode_delta.js" "$2/pcre2_categories.txt" >"$2/unicode_delta.c"
if cmp -s "$2/unicode_delta.c" "$here/../../../tokenizer/unicode_delta.c"; then
    echo "unicode delta: tokenizer/unicode_delta.c matches the reference"
else
    diff "$2/unicode_delta.c" "$here/../../../tokenizer/unicode_delta.c" | head -20
    echo "unicode delta: tokenizer/unicode_delta.c differs from the regenerated table" >&2
    exit 1
fi
