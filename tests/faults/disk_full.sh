#!/usr/bin/env bash
# The disk holding telemetry and the report fills up during a run (a 64 KiB tmpfs): generation goes
# on to the end, telemetry keeps only whole lines, each file says once that it could not be
# written, and the exit is 1 (something asked for was not written).
# usage: disk_full.sh DSSPEC MODEL_DIR      (root: mounts a tmpfs)
DSSPEC=$1 MODEL=$2
. "$(dirname "$0")/common.sh"
mkdir "$work/full"
mount -t tmpfs -o size=64k tmpfs "$work/full" || { fail "cannot mount a tmpfs (run as root)"; finish disk_full; }
cleanup_hooks="umount '$work/full';"
"$DSSPEC" run -m "$MODEL" --ids 0,5,9 -n 400 --ignore-eos --temp 0 --print-ids --quiet \
    --telemetry "$work/full/t.jsonl" --telemetry-every 1 --report "$work/full/r.json" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, want 1"
[ "$(wc -l <"$work/err")" -eq 2 ] || fail "want one line per file on stderr: $(cat "$work/err")"
grep -q -- "--telemetry $work/full/t.jsonl: cannot write (No space left on device)" "$work/err" || fail "no telemetry line: $(cat "$work/err")"
grep -q -- "--report $work/full/r.json: cannot write: No space left on device" "$work/err" || fail "no report line: $(cat "$work/err")"
[ "$(wc -w <"$work/out")" -eq 400 ] || fail "generation did not go on to the end: $(wc -w <"$work/out") ids"
check_telemetry_lines "$work/full/t.jsonl"
[ ! -e "$work/full/r.json" ] || check_report_valid "$work/full/r.json"
ls "$work/full" | grep -q tmp && fail "a temporary report file was left behind"
finish disk_full
