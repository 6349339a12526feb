#!/usr/bin/env bash
# Disk-bound decode at R1's shapes: bench/decode/r1_replay over a multi-layer R1 slice with a
# routing trace of the trace model, per cache policy and prefetch setting, repeated, against the
# disk's limit measured in the same run: the best of fio on the same shard files with
#   - sequential 64 MiB reads at queue depth 32 (the disk's streaming ceiling),
#   - random 44 MB (one expert) reads at queue depth 8 and 32,
#   - the reader's own request stream (r1_replay --write-iolog of the first run) at queue depth 8
#     and 32 (fio --read_iolog),
# each before and after the replays. I/O bound of a run = the bytes it read / that bandwidth.
# The disk under this VM moves between ~2 and ~6 GB/s from minute to minute, so each run is also
# paired with the disk's limit measured right after it: fio replaying the run's own first 200
# reads at queue depth 32, and sequential 64 MiB reads at queue depth 32 (the better of the two);
# "run/adjacent" divides by that.
#
# usage: bench/decode/r1_replay.sh SLICE_DIR [TRACE] [TOKENS] [SLOTS] [BUILD_DIR] [REPEAT] [CONFIGS] [WARMUP]
#   SLICE_DIR  build/bench/make_r1_slice --out SLICE_DIR --layers 6 (3 dense + 3 MoE: 40.0 GB)
#   TRACE      default bench/cache/traces/r1topo_code.jsonl.gz (20 MoE layers, 160 requests/token);
#              its recorded lookahead (TRACE with _lookahead.bin.gz for .jsonl.gz) is replayed when
#              present, else guesses are modelled at r1_replay's --recall
#   TOKENS     trace tokens per run (default 8); SLOTS expert slots (default 66 = 1.3% of 5,120)
#   REPEAT     runs per configuration, interleaved (default 3)
#   CONFIGS    "policy:depth[:guesses[,guesses2][:qd]] ..." (default: lfu, lru, arc x depth 0, 1, 2;
#              guesses default 8, the top-k; qd the reader's queue depth, default 8)
#   WARMUP     trace tokens replayed before the timed ones (default 8): they fill the cache and
#              fault its slots in (on this VM a first pass over fresh memory runs several times
#              slower), so the figures are a long run's steady state
# needs: fio; root for drop_caches (reads are O_DIRECT either way).
set -euo pipefail
slice=${1:?usage: r1_replay.sh SLICE_DIR [TRACE] [TOKENS] [SLOTS] [BUILD_DIR] [REPEAT] [CONFIGS] [WARMUP]}
trace=${2:-bench/cache/traces/r1topo_code.jsonl.gz}
tokens=${3:-8}
slots=${4:-66}
build=${5:-build}
repeat=${6:-3}
configs=${7:-"lfu:0 lfu:1 lfu:2 lru:0 lru:1 lru:2 arc:0 arc:1 arc:2"}
warmup=${8:-8}
lock=/tmp/dsspec-cpu.lock
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
command -v fio >/dev/null || { echo "r1_replay.sh: fio is not installed (apt-get install fio)" >&2; exit 2; }
lookahead=${trace%.jsonl.gz}_lookahead.bin.gz
la_args=()
[ -f "$lookahead" ] && la_args=(--lookahead "$lookahead")

shards=$(ls "$slice"/model-*-of-*.safetensors | paste -sd: -)
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
fio_json() { # name, then fio arguments; prints GB/s
  local name=$1; shift
  flock "$lock" sh -c "sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; fio --name=$name --ioengine=io_uring --direct=1 --output-format=json $* > $out/fio.json"
  python3 -c "import json; print(json.load(open('$out/fio.json'))['jobs'][0]['read']['bw_bytes'] / 1e9)"
}
fio_round() { # tag: every peer once
  echo "seq64m_qd32 $(fio_json seq --filename="$shards" --rw=read --bs=64m --iodepth=32 --io_size=8g)" >> "$out/fio_$1.txt"
  for qd in 8 32; do
    echo "rand44m_qd$qd $(fio_json rnd --filename="$shards" --rw=randread --bs=44060672 --blockalign=4k \
        --norandommap --randrepeat=0 --iodepth=$qd --io_size=8g)" >> "$out/fio_$1.txt"
    [ -s "$out/iolog" ] && echo "replay_qd$qd $(fio_json replay --read_iolog="$out/iolog" --iodepth=$qd --replay_no_stall=1)" >> "$out/fio_$1.txt"
  done
  return 0
}

run_one() { # policy depth guesses qd rep
  local p=$1 d=$2 g=$3 qd=$4 rep=$5 extra=() tag=$1.$2.$3.$4.$5
  [ -n "$g" ] && extra=(--guesses "$g")
  [ -n "$qd" ] && extra+=(--qd "$qd")
  flock "$lock" sh -c "sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; exec \"\$@\"" _ \
      "$build/bench/r1_replay" --slice "$slice" --trace "$trace" --tokens "$tokens" --warmup "$warmup" --slots "$slots" --policy "$p" \
      --prefetch-depth "$d" "${la_args[@]}" "${extra[@]}" --write-iolog "$out/iolog.run" --report "$out/$tag.json" > /dev/null
  [ -s "$out/iolog" ] || cp "$out/iolog.run" "$out/iolog"
  awk '!/ read / && !/ close$/' "$out/iolog.run" > "$out/iolog.head"
  awk '/ read / && ++n <= 200' "$out/iolog.run" >> "$out/iolog.head"
  awk '/ close$/' "$out/iolog.run" >> "$out/iolog.head"
  { fio_json adj --read_iolog="$out/iolog.head" --iodepth=32 --replay_no_stall=1
    fio_json adjseq --filename="$shards" --rw=read --bs=64m --iodepth=32 --io_size=8g; } > "$out/$tag.adj"
}

fio_round before
for ((rep = 1; rep <= repeat; rep++)); do
  for c in $configs; do
    IFS=: read -r p d g q <<< "$c"
    run_one "$p" "$d" "${g:-}" "${q:-}" "$rep"
  done
done
fio_round after
python3 - "$out" "$repeat" "$configs" "${la_args[*]:-modelled}" <<'PY'
import glob, json, statistics as st, sys
out, repeat, configs, la = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
peers = {}
for f in sorted(glob.glob(out + "/fio_*.txt")):
    for line in open(f):
        name, gbps = line.split()
        peers.setdefault(name, []).append(float(gbps))
best = max(v for vs in peers.values() for v in vs)
print("fio, GB/s (each run, before / after the replays): " + "; ".join(
    "%s %s" % (k, " ".join("%.2f" % v for v in vs)) for k, vs in peers.items()))
print("bound bandwidth = the best of them: %.2f GB/s; lookahead: %s" % (best, la))
print("%-6s %5s %7s %3s | %-17s %6s %6s %6s %6s %7s %6s | %6s %7s %-17s | %-17s" % (
    "policy", "depth", "guesses", "qd", "tok/s median [range]", "GB/tok", "hit %", "stall%", "reader", "recall", "waste",
    "run s", "bound s", "run/bound [range]", "run/adjacent [range]") + " | compute s")
for c in configs:
    p, d, *rest = c.split(":")
    g, q = (rest + ["", ""])[:2]
    files = sorted(glob.glob("%s/%s.%s.%s.%s.*.json" % (out, p, d, g, q)))
    runs = [json.load(open(f)) for f in files]
    if not runs:
        continue
    adj = [r["seconds"] / (r["cache"]["bytes_read"] / 1e9 / max(float(x) for x in open(f[:-5] + ".adj").read().split()))
           for r, f in zip(runs, files)]
    tps = [r["tokens_per_s"] for r in runs]
    ratio = [r["seconds"] / (r["cache"]["bytes_read"] / 1e9 / best) for r in runs]
    pf = [r["cache"]["prefetch"] for r in runs]
    med = lambda xs: st.median(xs)
    print("%-6s %5s %7s %3s | %6.3f [%.3f-%.3f] %6.2f %6.1f %6.1f %6.2f %6.1f%% %6.2f | %6.1f %7.1f %5.2f [%.2f-%.2f]" % (
        p, d, g or ("-" if d == "0" else "8"), q or "8", med(tps), min(tps), max(tps), med([r["gb_read_per_token"] for r in runs]),
        100 * med([r["hit_rate"] for r in runs]), 100 * med([r["stall_share"] for r in runs]),
        med([r["cache"]["bytes_read"] / 1e9 / r["seconds"] for r in runs]),
        100 * med([x["recall"] for x in pf]), med([x["wasted_per_useful"] for x in pf]),
        med([r["seconds"] for r in runs]), med([r["cache"]["bytes_read"] / 1e9 / best for r in runs]),
        med(ratio), min(ratio), max(ratio)) + " | %5.2f [%.2f-%.2f]" % (med(adj), min(adj), max(adj))
          + " | %5.1f" % med([r["resident_compute_s"] + r["expert_compute_s"] for r in runs]))
print("(%d runs per row, interleaved; reader = the replay's own GB/s; hit %% counts a request served by a prefetched slot;"
      " run/adjacent: each run against the disk measured right after it; compute s: the GEMVs' own time)" % repeat)
PY
