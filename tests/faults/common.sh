# Shared by the fault tests: sourced with DSSPEC and MODEL set. Needs coreutils and the binary.
set -u
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# Helpers set globals rather than print, because a failure inside $(...) would be lost with its subshell.
finish() { [ "$failures" -eq 0 ] && echo "$1: all checks passed" || { echo "$1: $failures failed" >&2; exit 1; }; exit 0; }

work=$(mktemp -d /tmp/dsspec_faults_XXXXXX)
cleanup_hooks=""
cleanup() { eval "$cleanup_hooks"; rm -rf "$work"; }
trap cleanup EXIT

# A number from a report (flat key, first match): json_num FILE KEY
json_num() { grep -o "\"$2\":[[:space:]]*[0-9.e+-]*" "$1" | head -1 | grep -o '[0-9.e+-]*$'; }
json_str() { grep -o "\"$2\":[[:space:]]*\"[^\"]*\"" "$1" | head -1 | sed 's/.*"\([^"]*\)"$/\1/'; }

# Every line of a telemetry file is one whole JSON object and the file ends with a newline.
check_telemetry_lines() {
  local f=$1
  [ -s "$f" ] || { fail "$f: no telemetry lines"; return; }
  [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f: the last line is cut"
  local bad
  bad=$(grep -cv '^{"elapsed_s":.*}$' "$f")
  [ "$bad" -eq 0 ] || fail "$f: $bad incomplete lines"
}

# The report exists and `dsspec report` reads it (it parses and is a run report).
check_report_valid() {
  "$DSSPEC" report "$1" >/dev/null 2>"$work/report_err" || fail "$1: not a valid report: $(cat "$work/report_err")"
}

# Exactly one line on stderr, containing $2.
check_one_line() {
  local n
  n=$(wc -l <"$1")
  [ "$n" -eq 1 ] || fail "want one stderr line, got $n: $(cat "$1")"
  grep -qF -- "$2" "$1" || fail "stderr does not name '$2': $(cat "$1")"
}

# A private copy of the model whose pages are not in the page cache.
copy_model() {
  cp -r "$MODEL" "$1"
  for f in "$1"/*; do dd if="$f" iflag=nocache count=0 status=none; done
}

# Waits (up to $2 seconds) until file $1 has at least $3 lines.
wait_lines() {
  local i=0
  while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$3" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
  [ "$(cat "$1" 2>/dev/null | wc -l)" -ge "$3" ] || fail "$1: fewer than $3 lines after $2 s"
}

# budget := the bytes of a budget that leaves room for 1/DIV of the experts (from a short planning
# run): budget_for MODEL DIV CTX. Exits the test when the planning run fails.
budget_for() {
  "$DSSPEC" run -m "$1" --ids 0,5,9 -n 1 --print-ids --quiet --ctx "$3" --kv-dtype bf16 --report "$work/plan.json" \
      >/dev/null 2>"$work/plan_err" || { fail "planning run failed: $(cat "$work/plan_err")"; finish "${0##*/}"; }
  local fixed slot total
  fixed=$(( $(json_num "$work/plan.json" resident_bytes) + $(json_num "$work/plan.json" kv_bytes) + $(json_num "$work/plan.json" buffer_bytes) ))
  slot=$(json_num "$work/plan.json" slot_bytes)
  total=$(json_num "$work/plan.json" total_experts)
  budget=$((fixed + slot * total / $2))
}

# Every line of $1 parses as JSON (lines), or the whole file does (whole); node is what the test
# suite installs (tools/test.sh), so a machine without it fails here rather than skipping the check.
check_json() {
  node -e 'const fs = require("fs"), [mode, f] = process.argv.slice(1), t = fs.readFileSync(f, "utf8");
    const parts = mode === "lines" ? t.split("\n").filter((l, i, a) => i < a.length - 1 || l !== "") : [t];
    parts.forEach((p, i) => { try { JSON.parse(p) } catch (e) { console.log(`${f}: ${mode === "lines" ? "line " + (i + 1) : "file"} is not JSON: ${e.message}`); process.exit(1) } });' \
    "$1" "$2" >"$work/json_err" 2>&1 || fail "$(cat "$work/json_err")"
}
check_json_lines() { check_json lines "$1"; }
