#!/usr/bin/env bash
# Every shard replaced (a corrupted copy renamed over it) while a run goes: the run keeps reading
# the files it opened, so its greedy ids equal those of an undisturbed run, and it exits 0.
# usage: replaced_shard.sh DSSPEC MODEL_DIR
DSSPEC=$1 MODEL=$2
. "$(dirname "$0")/common.sh"
copy_model "$work/m"
budget_for "$work/m" 4 8192
args=(--ids 0,5,9 -n 6000 --ignore-eos --temp 0 --print-ids --quiet --ctx 8192 --kv-dtype bf16 --mem-budget "$budget")
"$DSSPEC" run -m "$work/m" "${args[@]}" >"$work/want" 2>"$work/err0" || fail "undisturbed run failed: $(cat "$work/err0")"
"$DSSPEC" run -m "$work/m" "${args[@]}" --telemetry "$work/t.jsonl" --telemetry-every 8 >"$work/got" 2>"$work/err" &
pid=$!
wait_lines "$work/t.jsonl" 60 2
# Stopped while the shards are replaced, so a fast run cannot finish before the replacement does
# (it did once on a loaded machine, and the check below then failed with nothing wrong).
kill -STOP $pid
lines_at_stop=$(wc -l <"$work/t.jsonl")
for f in "$work/m"/*.safetensors; do
  head -c "$(stat -c %s "$f")" /dev/zero >"$f.new" && mv "$f.new" "$f"
done
kill -CONT $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $(cat "$work/err")"
# The run went on after the replacement: its telemetry grew (the line count itself depends on how
# --mtp auto's timing-driven drafting steps across the every-8-tokens marks).
[ "$lines_at_stop" -lt "$(wc -l <"$work/t.jsonl")" ] || fail "the shards were replaced only after the run (no check made)"
cmp -s "$work/want" "$work/got" || fail "ids differ from the undisturbed run"
finish replaced_shard
