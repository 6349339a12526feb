#!/usr/bin/env bash
# Decode on an R1-shaped checkpoint slice under a memory budget that leaves the expert cache a few
# slots (R1's ratio: ~1.3% of experts), for each cache policy, next to the I/O lower bound
# (bytes missed per token / fio's bandwidth on the same files, measured in this run).
#
# usage: bench/decode/r1_slice_decode.sh SLICE_DIR [BUILD_DIR] [TOKENS] [SLOTS] [THREADS]
#   SLICE_DIR  build/bench/make_r1_slice --out SLICE_DIR (3 dense + 1 MoE layer: 17 GB)
#   TOKENS     tokens generated per policy (default 24); SLOTS expert slots (default 8 = 3.1%)
# needs: fio, python3 (for the table), root for drop_caches (else says so; reads are O_DIRECT anyway).
set -euo pipefail
slice=${1:?usage: r1_slice_decode.sh SLICE_DIR [BUILD_DIR] [TOKENS] [SLOTS] [THREADS]}
build=${2:-build}
tokens=${3:-24}
slots=${4:-8}
threads=${5:-2}
dsspec="$build/dsspec"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(drop_caches refused: page cache left warm)"; }

# The peer: fio, io_uring + O_DIRECT, expert-sized (44 MB) random reads over the same shards, qd 8.
shards=$(ls "$slice"/model-*-of-*.safetensors | paste -sd: -)
drop_caches
fio --name=experts --filename="$shards" --ioengine=io_uring --direct=1 --rw=randread --bs=44050944 \
    --iodepth=8 --size=100% --io_size=4g --output-format=json --output="$out/fio.json" >/dev/null
fio_gbps=$(python3 -c "import json;j=json.load(open('$out/fio.json'));print(j['jobs'][0]['read']['bw_bytes']/1e9)")
echo "fio io_uring O_DIRECT 44 MB random reads, qd 8: $fio_gbps GB/s"

slot_bytes=44064768   # one expert slot: 44,050,944 bytes widened to 4 KiB at both ends
cache_gib=$(python3 -c "print(($slots + 0.5) * $slot_bytes / 2**30)")
for policy in lfu lru arc; do
  drop_caches
  "$dsspec" run -m "$slice" --ids 0,17,42,1000,5000,77,123,9999 -n "$tokens" --temp 0 --print-ids --ctx 256 \
      -t "$threads" --cache-policy "$policy" --cache-gib "$cache_gib" --mem-budget 6G \
      --report "$out/$policy.json" --quiet >/dev/null
done
python3 - "$out" "$fio_gbps" <<'PY'
import json, sys
out, fio = sys.argv[1], float(sys.argv[2])
print(f"{'policy':6} {'slots':>5} {'decode tok/s':>12} {'GB read/tok':>11} {'hit %':>6} {'stall %':>7} {'run s':>7} {'I/O bound s':>11} {'bound/run':>9} {'peak RSS GiB':>12}")
for p in ("lfu", "lru", "arc"):
    r = json.load(open(f"{out}/{p}.json"))
    c = r["cache"]
    total = r["prefill_seconds"] + r["decode_seconds"]
    bound = c["bytes_read"] / 1e9 / fio   # the whole run's expert bytes at fio's bandwidth
    print(f"{p:6} {r['plan']['slots']:5d} {r['decode_tokens_per_s']:12.3f} {r['bytes_read_per_token']/1e9:11.3f} {100*c['hit_rate']:6.1f} "
          f"{100*c['stall_ns']/1e9/total:7.1f} {total:7.2f} {bound:11.2f} {bound/total:9.2f} {r['peak_rss_bytes']/2**30:12.3f}")
print("(bytes and I/O bound cover the whole run, prompt included; the slice's router is random, so hits ~ slots/256)")
PY
