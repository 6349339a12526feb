#!/bin/sh
# usage: with_server.sh DSSPEC "SERVE FLAGS" CMD [ARGS...]
# Starts `DSSPEC serve --port 0 SERVE FLAGS` (the kernel picks a free port), waits for its
# "listening on http://HOST:PORT" line, runs CMD ARGS... URL, then stops the server with SIGTERM
# and requires a clean exit (status 0; under ASan that includes no leak). Fails when any step does.
set -u
dsspec=$1; serve_flags=$2; shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086  # the flags are words
"$dsspec" serve --port 0 --quiet $serve_flags >"$tmp/out" 2>"$tmp/err" &
pid=$!
url=""
i=0
while [ $i -lt 600 ]; do
    url=$(sed -n 's/^dsspec serve: listening on \(http:[^ ]*\).*/\1/p' "$tmp/out")
    [ -n "$url" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
if [ -z "$url" ]; then
    echo "with_server: the server did not start; its stderr:" >&2
    cat "$tmp/err" >&2
    kill -KILL $pid 2>/dev/null
    exit 1
fi
echo "with_server: $url"
"$@" "$url"
rc=$?
kill -TERM $pid
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 $pid 2>/dev/null; then
    echo "with_server: the server did not stop within 30 s of SIGTERM" >&2
    kill -KILL $pid
    rc=1
fi
wait $pid
src=$?
if [ $src -ne 0 ]; then
    echo "with_server: the server exited with status $src; its stderr:" >&2
    cat "$tmp/err" >&2
    rc=1
fi
exit $rc
