#!/usr/bin/env bash
# The long local fuzzing run: every harness for SECONDS each, one after another, from a corpus that
# persists in OUT (so repeated runs continue where the last stopped), then one table: executions,
# edges covered (cov), coverage features (ft), corpus size and crashes. Crash inputs land in
# OUT/crashes/; each one fixed is kept as tests/fuzz/regressions/NAME/<what it was>.
#
# usage: tests/fuzz/fuzz_long.sh BUILD_FUZZ_DIR SECONDS_EACH OUT [HARNESS...]
#   BUILD_FUZZ_DIR: CC=clang cmake -S . -B build-fuzz -DDSSPEC_FUZZ=ON && cmake --build build-fuzz --target fuzz_harnesses
set -uo pipefail
cd "$(dirname "$0")/../.."
build=$1 seconds=$2 out=$3
shift 3
harnesses=${*:-config safetensors index checkpoint tokenizer_load tokenizer_config encode decode chat trace report flags session}
mkdir -p "$out/crashes" "$out/logs"
for h in $harnesses; do
  mkdir -p "$out/corpus/$h"
  maxlen=65536; [ "$h" = index ] && maxlen=262144
  fdmask=0; case $h in report|flags) fdmask=3 ;; esac
  "$build/tests/fuzz_$h" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=$maxlen -close_fd_mask=$fdmask \
      -print_final_stats=1 -dict="tests/fuzz/dicts/$h.dict" -artifact_prefix="$out/crashes/$h-" \
      "$out/corpus/$h" "tests/fuzz/seeds/$h" >"$out/logs/$h.log" 2>&1
  echo "$h exit $?" >>"$out/logs/exits"
done
printf '%-17s %12s %6s %7s %8s %8s\n' harness executions cov ft corpus crashes
total=0
for h in $harnesses; do
  log="$out/logs/$h.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*'); ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  crashes=$(ls "$out/crashes" | grep -c "^$h-" || true)
  printf '%-17s %12s %6s %7s %8s %8s\n' "$h" "${execs:-0}" "${cov:-?}" "${ft:-?}" "$(ls "$out/corpus/$h" | wc -l)" "$crashes"
  total=$((total + ${execs:-0}))
done
echo "total executions: $total"
