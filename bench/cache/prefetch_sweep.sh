#!/bin/sh
# Router-lookahead prefetch on the embedded model: recall and wasted reads per useful read across
# cache sizes, lookahead depths and guesses per layer, one greedy run each (deterministic: the same
# tokens and, with one thread, the same requests every time; the counts are not timings).
# usage: bench/cache/prefetch_sweep.sh [BUILD_DIR] [TOKENS] [SLOTS...]
# recall = would-be misses a guess caught = used / (used + misses); waste = wasted / used;
# ceiling = the recall had every guess been read (guessed misses counted as caught).
set -eu
build=${1:-build}
tokens=${2:-400}
shift 2 2>/dev/null || shift $#
slots=${*:-7 24 57}
prompt='def quicksort(arr):'
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
slot_bytes=81920 # one expert of the embedded model, 4 KiB-widened pieces (the plan prints it)
printf '%5s %5s %7s | %6s %6s | %6s %6s %6s | %6s %5s %7s\n' slots depth guesses hit% misses issued used wasted recall waste ceiling
for s in $slots; do
  gib=$(awk -v s="$s" -v b="$slot_bytes" 'BEGIN { printf "%.9f", (s * b + 1024) / 1073741824 }')
  for cfg in "off 0 0" "on 1 0" "on 1 2" "on 1 4" "on 1 8" "on 1 12" "on 2 0" "on 2 2" "on 2 4" "on 2 8" "on 2 12"; do
    set -- $cfg
    depth=$2; [ "$depth" = 0 ] && depth=1
    "$build/dsspec" run -p "$prompt" --mem-budget 40M --cache-gib "$gib" --ctx 2048 -n "$tokens" --temp 0 --mtp off \
      -t 1 --prefetch "$1" --prefetch-depth "$depth" --prefetch-guesses "$3" --report "$out/r.json" \
      --quiet >/dev/null 2>"$out/err" || { cat "$out/err"; exit 1; }
    python3 - "$out/r.json" "$s" "$2" "$3" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cache"]
p = c["prefetch"]
used, wasted, miss = p["used"], p["wasted"], c["misses"]
recall = used / (used + miss) if used + miss else 0
waste = wasted / used if used else float("nan")
print("%5s %5s %7s | %5.1f%% %6d | %6d %6d %6d | %5.1f%% %5.2f %6.1f%%" % (c["slots"], sys.argv[3], sys.argv[4] if sys.argv[4] != "0" else "top-k",
      100 * c["hit_rate"], miss, p["issued"], used, wasted, 100 * recall, waste, 100 * p["guess_recall"]))
PY
  done
done
