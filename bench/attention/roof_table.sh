#!/bin/sh
# The attention's share of its binding roof as a table: bench_attention run RUNS times per kernel
# path (interleaved), the median of each line's per-run median with the [range] of those medians.
#   bench/attention/roof_table.sh BUILD [RUNS] [PATHS] [extra bench_attention options]
#   e.g. bench/attention/roof_table.sh build 3 "avx512 avx2" --seconds 0.5
set -eu
build=${1:?usage: roof_table.sh BUILD [RUNS] [PATHS] [bench_attention options]}
runs=${2:-3}
paths=${3:-"avx512 avx2"}
shift; [ $# -gt 0 ] && shift; [ $# -gt 0 ] && shift
bench=$build/bench/bench_attention
[ -x "$bench" ] || { echo "roof_table.sh: no $bench (build the bench target first)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=1
while [ "$i" -le "$runs" ]; do
    for p in $paths; do
        "$bench" --path "$p" "$@" | awk -v p="$p" '$1 == "R1" || $1 == "embedded" {
            for (f = 1; f <= NF; f++) if ($f ~ /%$/) { v = $f; sub(/%/, "", v); break }
            print p, $1, $2, $3, $4, v }' >>"$out/lines"
    done
    i=$((i + 1))
done
echo "| path | shape | T | dtype | threads | share of binding roof: median [range of $runs runs] |"
echo "| --- | --- | --- | --- | --- | --- |"
sort -k1,1 -k2,2 -k5,5n -k4,4 -k3,3n "$out/lines" | awk '
    function flush(   i, j, t) { if (n == 0) return
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
        printf "| %s | %s | %s | %s | %s | %.1f%% [%.1f-%.1f] |\n", a[1], a[2], a[3], a[4], a[5], m, v[1], v[n]; n = 0; delete v }
    { key = $1 " " $2 " " $3 " " $4 " " $5; if (key != last) { flush(); split(key, a, " "); last = key } v[++n] = $6 }
    END { flush() }'
