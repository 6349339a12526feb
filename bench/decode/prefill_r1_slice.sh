#!/usr/bin/env bash
# Expert reads of prefill on an R1-shaped slice: one 512-token prompt (random ids, fixed seed) with
# --prefill-chunk 64 and with the default chunk (the plan's, from the budget), each from a cold
# cache of a few slots. Per run: the chunk, expert reads (bytes read / one expert's bytes), the
# distinct experts the routing trace shows per layer per chunk (summed: the reads expert-major
# prefill may make at most), bytes read per prompt token, and prefill seconds.
#
# usage: bench/decode/prefill_r1_slice.sh SLICE_DIR [BUILD_DIR] [BUDGET] [CACHE_GIB] [THREADS]
#   SLICE_DIR  build/bench/make_r1_slice --out SLICE_DIR (3 dense + 1 MoE layer: 17 GB)
#   BUDGET     --mem-budget (default 8G: the default chunk covers the prompt); CACHE_GIB 0.35 (8 slots)
set -euo pipefail
slice=${1:?usage: prefill_r1_slice.sh SLICE_DIR [BUILD_DIR] [BUDGET] [CACHE_GIB] [THREADS]}
build=${2:-build}; budget=${3:-8G}; cache=${4:-0.35}; threads=${5:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ids=$(python3 -c "import random; random.seed(5); print(','.join(str(random.randrange(1, 129000)) for _ in range(512)))")
for chunk in 64 default; do
    extra=(); [ "$chunk" = default ] || extra=(--prefill-chunk "$chunk")
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    "$build/dsspec" run -m "$slice" --ids "$ids" -n 1 --temp 0 --ctx 1024 -t "$threads" --mem-budget "$budget" \
        --cache-gib "$cache" "${extra[@]}" --print-ids --no-progress --report "$out/$chunk.json" \
        --trace-out "$out/$chunk.trace" >/dev/null 2>"$out/$chunk.err" || { cat "$out/$chunk.err" >&2; exit 1; }
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
expert_bytes = 44050944   # one R1 expert: gate, up, down FP8 + their scale grids
print(f"{'chunk':>13} {'expert reads':>12} {'distinct/layer/chunk':>20} {'MB read/prompt token':>20} {'prefill s':>9}")
for name in ("64", "default"):
    r = json.load(open(f"{out}/{name}.json"))
    rows = [json.loads(l) for l in open(f"{out}/{name}.trace")][:r["prompt_tokens"]]
    chunk = r["plan"]["prefill_chunk"]
    bound = sum(len({e for row in rows[c:c + chunk] for e in row[layer]}) for c in range(0, len(rows), chunk) for layer in rows[0])
    pe = r["prefill_experts"]
    reads = pe["bytes_read"] / expert_bytes
    label = f"{chunk}" + (" (plan)" if name == "default" else "")
    print(f"{label:>13} {reads:12.0f} {bound:20d} {pe['bytes_read_per_prompt_token'] / 1e6:20.1f} {r['prefill_seconds']:9.1f}"
          + ("" if reads <= bound else "  MORE READS THAN DISTINCT EXPERTS"))
PY
