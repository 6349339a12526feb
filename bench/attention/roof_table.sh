#!/bin/sh
# The attention's share of its binding roof as a table: bench_attention run RUNS times per kernel
# path (interleaved), the median of each line's per-run median with the [range] of those medians.
# Several builds, comma-separated, run in turn within each round (the first one's bench, then the
# next's, ...), one column each: on a machine whose speed moves in phases only interleaved runs
# compare builds.
#   bench/attention/roof_table.sh BUILD[,BUILD...] [RUNS] [PATHS] [extra bench_attention options]
#   e.g. bench/attention/roof_table.sh build 3 "avx512 avx2" --seconds 0.5
#        bench/attention/roof_table.sh /tmp/build-old,build 10 avx2 --seconds 0.3
set -eu
builds=${1:?usage: roof_table.sh BUILD[,BUILD...] [RUNS] [PATHS] [bench_attention options]}
runs=${2:-3}
paths=${3:-"avx512 avx2"}
shift; [ $# -gt 0 ] && shift; [ $# -gt 0 ] && shift
builds=$(echo "$builds" | tr ',' ' ')
for b in $builds; do
    [ -x "$b/bench/bench_attention" ] || { echo "roof_table.sh: no $b/bench/bench_attention (build the bench target first)" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=1
while [ "$i" -le "$runs" ]; do
    for p in $paths; do
        col=1
        for b in $builds; do
            "$b/bench/bench_attention" --path "$p" "$@" | awk -v p="$p" -v c="$col" '$1 == "R1" || $1 == "embedded" {
                for (f = 1; f <= NF; f++) if ($f ~ /%$/) { v = $f; sub(/%/, "", v); break }
                print p, $1, $2, $3, $4, c, v }' >>"$out/lines"
            col=$((col + 1))
        done
    done
    i=$((i + 1))
done
header="| path | shape | T | dtype | threads |"
rule="| --- | --- | --- | --- | --- |"
for b in $builds; do header="$header $b: median [range of $runs runs] |"; rule="$rule --- |"; done
echo "$header"
echo "$rule"
sort -k1,1 -k2,2 -k5,5n -k4,4 -k3,3n -k6,6n "$out/lines" | awk -v ncol="$(echo $builds | wc -w)" '
    function cell(   i, j, t, m) {
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
        row = row sprintf(" %.1f%% [%.1f-%.1f] |", m, v[1], v[n]); n = 0; delete v }
    function flush() { if (n) cell(); if (row != "") print row; row = "" }
    { key = $1 " " $2 " " $3 " " $4 " " $5
      if (key != last) { flush(); row = "| " $1 " | " $2 " | " $3 " | " $4 " | " $5 " |"; last = key; lastc = $6 }
      else if ($6 != lastc) { cell(); lastc = $6 }
      v[++n] = $7 }
    END { flush() }'
