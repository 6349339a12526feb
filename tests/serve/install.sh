#!/bin/sh
# `cmake --install` into a temporary prefix, the tree moved elsewhere, and the moved binary run:
# it must find the installed model beside itself (not the build or source tree), give the same
# greedy tokens as the build's binary, and serve.
# usage: install.sh BUILD_DIR BUILD_DSSPEC
set -u
build=$1; built=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
mv "$tmp/prefix" "$tmp/moved"
bin="$tmp/moved/bin/dsspec"
model="$tmp/moved/share/dsspec/models/dsspec-tiny"
[ -x "$bin" ] && [ -f "$model/config.json" ] && [ -f "$model/tokenizer.json" ] || { echo "FAIL: install lacks $bin or $model"; exit 1; }
found=$("$bin" --version | sed -n 's/^embedded model: //p')
[ "$found" = "$(cd "$model" && pwd -P)" ] || { echo "FAIL: the moved binary uses '$found', not $model"; fail=1; }
want=$("$built" run --ids 0,17,42 -n 12 --temp 0 --print-ids --quiet)
got=$("$bin" run --ids 0,17,42 -n 12 --temp 0 --print-ids --quiet)
[ -n "$want" ] && [ "$got" = "$want" ] || { echo "FAIL: installed run gives '$got', the build's '$want'"; fail=1; }
got=$("$bin" run -p "def f(x):" -n 8 --temp 0 --quiet)
[ -n "$got" ] || { echo "FAIL: installed run with text gives nothing"; fail=1; }
sh "$(dirname "$0")/with_server.sh" "$bin" "" sh -c 'curl -s -f -o "$0" "$1/health"' "$tmp/health" || fail=1
grep -q '"status":"ok"' "$tmp/health" 2>/dev/null || { echo "FAIL: the installed server's /health"; fail=1; }
[ $fail = 0 ] && echo "install: the moved tree runs and serves with its own model ($model)"
exit $fail
