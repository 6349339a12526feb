#!/usr/bin/env bash
# Prompt processing with every expert already cached, as llama.cpp measures it (its weights are
# mmapped and warm): one `dsspec batch` of JOBS prompts of LEN random ids (1 generated token each),
# the first 10 jobs warm the expert cache and are left out; prints each thread count's prefill
# tokens/s per prompt as median [min, max], the thread counts interleaved over ROUNDS rounds.
#   usage: bench/decode/prefill_warm.sh [BUILD_DIR] [THREADS_LIST] [LEN] [JOBS] [ROUNDS] [MODEL_DIR]
#   e.g.   bench/decode/prefill_warm.sh build 1,2 64 40 3
set -euo pipefail
build=${1:-build}; threads=${2:-1,2}; len=${3:-64}; jobs=${4:-40}; rounds=${5:-3}; model=${6:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 - "$out/jobs.jsonl" "$len" "$jobs" <<'PY'
import json, random, sys
path, n, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
with open(path, "w") as f:
    for j in range(jobs):
        f.write(json.dumps({"id": str(j), "ids": [random.randrange(100, 4000) for _ in range(n)], "n": 1, "temperature": 0}) + "\n")
PY
IFS=, read -r -a ts <<< "$threads"
for ((r = 1; r <= rounds; r++)); do
    for t in "${ts[@]}"; do
        "$build/dsspec" batch "$out/jobs.jsonl" --out "$out/r$t.$r.jsonl" --threads "$t" --mtp off --quiet ${model:+-m "$model"} 2>/dev/null
    done
done
python3 - "$out" "$threads" "$len" <<'PY'
import glob, json, statistics, sys
out, threads, n = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
for t in threads:
    rates = []
    for path in glob.glob(f"{out}/r{t}.*.jsonl"):
        lines = [json.loads(l) for l in open(path)][10:]
        rates += [n / l["prefill_seconds"] for l in lines if l.get("prefill_seconds")]
    print(f"{t} thread(s): {len(rates)} warm {n}-token prompts, prefill {statistics.median(rates):,.0f} tok/s "
          f"[{min(rates):,.0f}, {max(rates):,.0f}]")
PY
