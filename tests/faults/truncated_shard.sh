#!/usr/bin/env bash
# A shard truncated while a run reads experts from it: the run stops with one error line naming the
# file, exit 1, the report says stopped_by "io_error", and every telemetry line is whole.
# usage: truncated_shard.sh DSSPEC MODEL_DIR
DSSPEC=$1 MODEL=$2
. "$(dirname "$0")/common.sh"
copy_model "$work/m"
budget_for "$work/m" 4 20000
"$DSSPEC" run -m "$work/m" --ids 0,5,9 -n 1000000 --ignore-eos --temp 0 --print-ids --quiet --ctx 20000 --kv-dtype bf16 \
    --mem-budget "$budget" --telemetry "$work/t.jsonl" --telemetry-every 4 --report "$work/r.json" >"$work/out" 2>"$work/err" &
pid=$!
wait_lines "$work/t.jsonl" 60 3
last=$(ls "$work/m"/*.safetensors | tail -1)
truncate -s $(( $(stat -c %s "$last") / 2 )) "$last"
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, want 1 (a runtime error)"
check_one_line "$work/err" "$last"
check_report_valid "$work/r.json"
[ "$(json_str "$work/r.json" stopped_by)" = io_error ] || fail "stopped_by $(json_str "$work/r.json" stopped_by), want io_error"
[ "$(json_num "$work/r.json" generated)" -gt 0 ] || fail "the report lost the tokens generated before the fault"
check_telemetry_lines "$work/t.jsonl"
[ "$(wc -w <"$work/out")" -eq "$(json_num "$work/r.json" generated)" ] || fail "stdout has not every generated id"
finish truncated_shard
