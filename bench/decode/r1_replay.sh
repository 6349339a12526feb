#!/usr/bin/env bash
# Disk-bound decode at R1's shapes: bench/decode/r1_replay over a multi-layer R1 slice with a
# routing trace of the trace model, per cache policy and prefetch depth, next to the I/O lower
# bound (expert bytes the run read / fio's bandwidth on the same shards, measured in this run).
#
# usage: bench/decode/r1_replay.sh SLICE_DIR [TRACE] [TOKENS] [SLOTS] [BUILD_DIR]
#   SLICE_DIR  build/bench/make_r1_slice --out SLICE_DIR --layers 6 (3 dense + 3 MoE: 40.0 GB)
#   TRACE      default bench/cache/traces/r1topo_code.jsonl.gz (20 MoE layers, 160 requests/token)
#   TOKENS     trace tokens replayed per run (default 8); SLOTS expert slots (default 66 = 1.3% of 5,120)
# needs: fio; root for drop_caches (reads are O_DIRECT either way).
set -euo pipefail
slice=${1:?usage: r1_replay.sh SLICE_DIR [TRACE] [TOKENS] [SLOTS] [BUILD_DIR]}
trace=${2:-bench/cache/traces/r1topo_code.jsonl.gz}
tokens=${3:-8}
slots=${4:-66}
build=${5:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
command -v fio >/dev/null || { echo "r1_replay.sh: fio is not installed (apt-get install fio)" >&2; exit 2; }

shards=$(ls "$slice"/model-*-of-*.safetensors | paste -sd: -)
fio_run() {
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  fio --name=experts --filename="$shards" --ioengine=io_uring --direct=1 --rw=randread --bs=44060672 \
      --iodepth=8 --size=100% --io_size=4g --output-format=json --output="$out/fio$1.json" >/dev/null
}
fio_run 1
for policy in lfu lru arc; do
  for depth in 0 1 2; do
    "$build/bench/r1_replay" --slice "$slice" --trace "$trace" --tokens "$tokens" --slots "$slots" \
        --policy "$policy" --prefetch-depth "$depth" --report "$out/$policy.$depth.json" >/dev/null
  done
done
fio_run 2
python3 - "$out" "$tokens" <<'PY'
import json, sys
out, tokens = sys.argv[1], int(sys.argv[2])
bw = [json.load(open(f"{out}/fio{i}.json"))["jobs"][0]["read"]["bw_bytes"] / 1e9 for i in (1, 2)]
fio = sum(bw) / 2
print(f"fio io_uring O_DIRECT 44 MB random reads, qd 8: {bw[0]:.2f} / {bw[1]:.2f} GB/s (before / after), mean {fio:.2f}")
print(f"{'policy':6} {'depth':>5} {'tok/s':>6} {'GB/tok':>6} {'hit %':>6} {'stall %':>7} {'pf recall':>9} {'waste/use':>9} {'run s':>6} {'I/O bound s':>11} {'run/bound':>9}")
for p in ("lfu", "lru", "arc"):
    for d in (0, 1, 2):
        r = json.load(open(f"{out}/{p}.{d}.json"))
        c, pf = r["cache"], r["cache"]["prefetch"]
        bound = c["bytes_read"] / 1e9 / fio
        print(f"{p:6} {d:5d} {r['tokens_per_s']:6.3f} {r['gb_read_per_token']:6.2f} {100*r['hit_rate']:6.1f} {100*r['stall_share']:7.1f} "
              f"{100*pf['recall']:8.1f}% {pf['wasted_per_useful']:9.2f} {r['seconds']:6.1f} {bound:11.1f} {r['seconds']/bound:9.2f}")
PY
