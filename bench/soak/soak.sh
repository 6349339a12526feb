#!/usr/bin/env bash
# Soak: ONE `dsspec run` generating TOKENS tokens in one sequence on the embedded model (MTP on,
# sampled, EOS ignored, a small expert cache, a telemetry line every 256 tokens, a report), sampled
# from outside every SECONDS: resident set (VmRSS), open descriptors (/proc/PID/fd) and mappings
# (/proc/PID/maps lines). Prints the RSS slope after warm-up, descriptor and mapping growth, how
# telemetry grows with tokens and tok/s at the start and the end of the run.
#
# The KV cache is allocated for the whole context up front but its pages are touched one position
# at a time, so VmRSS legitimately grows by the KV bytes of each new token (kv_bytes / ctx per
# position, in the report); the analysis reports the raw slope and the slope left after that growth.
#
# usage: bench/soak/soak.sh [BUILD_DIR] [TOKENS] [SECONDS] [OUT_DIR] [THREADS]
#        (default build 102400 5, a temp dir, 1 thread)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build} tokens=${2:-102400} every_s=${3:-5} out=${4:-} threads=${5:-1}
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; else mkdir -p "$out"; fi
rm -f "$out/telemetry.jsonl" "$out/report.json"
ctx=$((tokens + 100))
warm=4096
# 1 GiB whole-process budget holds the f32 KV of the whole context (3.12 MiB per 1k positions) and
# the buffers; --cache-gib 0.005 keeps 65 of the 256 routed experts (a quarter) in the cache.
"$build/dsspec" run --ids 0,3001,815 -n "$tokens" --ignore-eos --ctx "$ctx" -t "$threads" --mtp on --temp 0.8 --seed 7 \
  --mem-budget 1G --cache-gib 0.005 --telemetry "$out/telemetry.jsonl" --telemetry-every 256 \
  --report "$out/report.json" --print-ids --no-progress >"$out/ids" 2>"$out/log" &
pid=$!
printf 'elapsed_s\ttokens\trss_kib\tfds\tmaps\ttelemetry_bytes\n' >"$out/samples.tsv"
t0=$(date +%s.%N)
while kill -0 $pid 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null) || break
  fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
  maps=$(wc -l </proc/$pid/maps 2>/dev/null) || break
  tel=$(stat -c %s "$out/telemetry.jsonl" 2>/dev/null || echo 0)
  toks=$(tail -1 "$out/telemetry.jsonl" 2>/dev/null | grep -o '"generated":[0-9]*' | grep -o '[0-9]*$' || echo 0)
  [ -n "$rss" ] && printf '%.1f\t%s\t%s\t%s\t%s\t%s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "${toks:-0}" "$rss" "$fds" "$maps" "$tel" >>"$out/samples.tsv"
  sleep "$every_s"
done
rc=0; wait $pid || rc=$?
grep -v '^ ' "$out/log" | head -3
grep '^dsspec:' "$out/log" | tail -1
[ "$rc" = 0 ] || { echo "soak: dsspec run exited $rc"; exit 1; }
# KV bytes per position, exactly: the report's KV bytes over the context it was sized for.
kv_per_pos=$(awk -v b="$(grep -o '"kv_bytes":[[:space:]]*[0-9]*' "$out/report.json" | head -1 | grep -o '[0-9]*$')" -v c=$ctx 'BEGIN { print b / c }')
# Slopes by least squares over the samples after warm-up (the cache fills, buffers settle).
awk -F'\t' -v warm=$warm -v kv="$kv_per_pos" '
NR == 1 { next }
{ n_all++; if ($2 >= warm) { n++; x = $2 / 1000; y = $3; sx += x; sy += y; sxx += x * x; sxy += x * y
    if (n == 1 || $3 < rmin) rmin = $3; if (n == 1 || $3 > rmax) rmax = $3
    if (n == 1) { f0 = $4; m0 = $5 } f1 = $4; m1 = $5; t1 = $1; tok1 = $2
    if (n == 1 || $4 > fmax) fmax = $4; if (n == 1 || $5 > mmax) mmax = $5 }
  if ($2 > 0) { tn++; tx = $2; ty = $6; tsx += tx; tsy += ty; tsxx += tx * tx; tsxy += tx * ty; tsyy += ty * ty } }
END {
  slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
  kv_kib = kv * 1000 / 1024
  printf "samples: %d (%d after warm-up at %d tokens), %d tokens in %.0f s\n", n_all, n, warm, tok1, t1
  printf "RSS after warm-up: %.1f-%.1f MiB, slope %.1f KiB per 1000 tokens; KV touched per 1000 tokens %.1f KiB; slope less KV %.2f KiB per 1000 tokens\n", rmin / 1024, rmax / 1024, slope, kv_kib, slope - kv_kib
  printf "descriptors: %d at warm-up, %d at the end, max %d; mappings: %d at warm-up, %d at the end, max %d\n", f0, f1, fmax, m0, m1, mmax
  b = (tn * tsxy - tsx * tsy) / (tn * tsxx - tsx * tsx); a = (tsy - b * tsx) / tn
  r = (tn * tsxy - tsx * tsy) / sqrt((tn * tsxx - tsx * tsx) * (tn * tsyy - tsy * tsy))
  printf "telemetry: %.1f bytes per generated token (least squares over %d samples, intercept %.0f bytes, r^2 %.6f)\n", b, tn, a, r * r
}' "$out/samples.tsv"
lines=$(wc -l <"$out/telemetry.jsonl")
bytes=$(stat -c %s "$out/telemetry.jsonl")
echo "telemetry file: $lines lines, $bytes bytes; first/last line $(head -1 "$out/telemetry.jsonl" | wc -c)/$(tail -1 "$out/telemetry.jsonl" | wc -c) bytes"
# tok/s over the first and the last 4096 generated tokens, from the telemetry's own clock.
grep -o '"elapsed_s":[0-9.e+-]*,"generated":[0-9]*' "$out/telemetry.jsonl" | tr -d '"a-z_' | tr ':' ' ' | awk -F'[ ,]+' -v w=$warm '
{ t[NR] = $2; g[NR] = $3 }
END {
  for (i = 1; i <= NR && g[i] < w; i++); first = i
  for (j = NR; j >= 1 && g[j] > g[NR] - w; j--); last = j
  printf "tok/s: %.1f over tokens 0-%d, %.1f over tokens %d-%d\n", g[first] / t[first], g[first], (g[NR] - g[last]) / (t[NR] - t[last]), g[last], g[NR]
}'
