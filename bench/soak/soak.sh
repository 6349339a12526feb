#!/usr/bin/env bash
# Soak: one process generating TOKENS tokens on the embedded model (MTP on, a small expert cache,
# telemetry every 256 tokens), sampled from outside every SECONDS: resident set (VmRSS), open
# descriptors (/proc/PID/fd) and mappings (/proc/PID/maps lines). Prints the RSS slope after
# warm-up (the first chunk), descriptor and mapping growth, and how telemetry grows with tokens.
#
# usage: bench/soak/soak.sh [BUILD_DIR] [TOKENS] [SECONDS]      (default build 102400 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build} tokens=${2:-102400} every_s=${3:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# 40 MiB whole-process budget with ctx 4096: the plan leaves about a quarter of the experts.
"$build/bench/bench_soak" models/dsspec-tiny "$tokens" $((40 << 20)) 4096 "$out/telemetry.jsonl" 256 >"$out/log" &
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
wait $pid
head -1 "$out/log"
tail -2 "$out/log"
cp "$out/samples.tsv" "${SOAK_SAMPLES_OUT:-/dev/null}" 2>/dev/null || true
# Warm-up: samples before the first chunk of 4088 tokens ends (the cache fills, buffers settle).
awk -F'\t' -v warm=4088 '
NR == 1 { next }
{ n_all++; if ($2 >= warm) { n++; x = $2 / 1000; y = $3; sx += x; sy += y; sxx += x * x; sxy += x * y
    if (n == 1 || $3 < rmin) rmin = $3; if (n == 1 || $3 > rmax) rmax = $3
    if (n == 1) { f0 = $4; m0 = $5; t0 = $1 } f1 = $4; m1 = $5; t1 = $1; tok1 = $2
    if (n == 1 || $4 > fmax) fmax = $4; if (n == 1 || $5 > mmax) mmax = $5 }
  if ($2 > 0) { tn++; tx = $2; ty = $6; tsx += tx; tsy += ty; tsxx += tx * tx; tsxy += tx * ty } }
END {
  slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
  printf "samples: %d (%d after warm-up), %d tokens in %.0f s\n", n_all, n, tok1, t1
  printf "RSS after warm-up: %.1f-%.1f MiB, slope %.3f KiB per 1000 tokens (%.2f MiB over the run)\n", rmin / 1024, rmax / 1024, slope, slope * (tok1 - warm) / 1000 / 1024
  printf "descriptors: %d at warm-up, %d at the end, max %d; mappings: %d at warm-up, %d at the end, max %d\n", f0, f1, fmax, m0, m1, mmax
  b = (tn * tsxy - tsx * tsy) / (tn * tsxx - tsx * tsx); a = (tsy - b * tsx) / tn
  printf "telemetry: %.1f bytes per generated token (least squares over %d samples, intercept %.0f bytes)\n", b, tn, a
}' "$out/samples.tsv"
lines=$(wc -l <"$out/telemetry.jsonl")
bytes=$(stat -c %s "$out/telemetry.jsonl")
echo "telemetry file: $lines lines, $bytes bytes; first/last line $(head -1 "$out/telemetry.jsonl" | wc -c)/$(tail -1 "$out/telemetry.jsonl" | wc -c) bytes"
