#!/bin/sh
# Test fixture: installs the third-party clients the server is tested with, pinned, into the
# git-ignored tests/data/serve_npm: OpenAI's official client (npm openai@5.23.2; its 5.x line
# runs on Debian 12's node 18) and a Prometheus text-format parser (parse-prometheus-text-format@1.1.1,
# ported from the Prometheus Python client's parser). Any failure exits non-zero so that the tests
# depending on it FAIL instead of skipping.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST="$ROOT/tests/data/serve_npm"
OPENAI=5.23.2
PROM=1.1.1

die() { echo "serve fetch: $*" >&2; exit 1; }
command -v node >/dev/null || die "node not found (tools/test.sh installs Debian's nodejs and npm)"
command -v npm >/dev/null || die "npm not found (tools/test.sh installs Debian's nodejs and npm)"

installed_version() { node -p "require('$DEST/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed_version openai)" != $OPENAI ] || [ "$(installed_version parse-prometheus-text-format)" != $PROM ]; then
    mkdir -p "$DEST"
    [ -f "$DEST/package.json" ] || echo '{"name": "dsspec-serve-tests", "private": true}' > "$DEST/package.json"
    (cd "$DEST" && npm install --no-save --no-audit --no-fund --silent "openai@$OPENAI" "parse-prometheus-text-format@$PROM") \
        || die "npm install openai@$OPENAI parse-prometheus-text-format@$PROM failed (registry unreachable?)"
fi
node -e "require('$DEST/node_modules/openai'); require('$DEST/node_modules/parse-prometheus-text-format')" \
    || die "the clients do not load on this node ($(node --version))"
echo "serve fetch: ok ($DEST)"
