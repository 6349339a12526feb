#!/usr/bin/env bash
# Prefill and decode tokens/s on the reference fixtures and the embedded model (MTP off and on,
# all experts cached), then `dsspec ab` on the embedded model with a large cache (compute-bound)
# and a small one (I/O-bound: a budget that leaves ~20% of the experts, cold O_DIRECT reads).
# The A/B runs generate 1000 tokens so that the cold start (every run begins with an empty cache)
# does not dominate the compute-bound comparison.
#
# usage: bench/decode/speed.sh [BUILD_DIR] [THREADS]     needs python3 for the table
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
threads=${2:-1}
dsspec="$build/dsspec"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ids() { python3 -c "print(','.join(['0'] + [str((i * 37 + 11) % 500) for i in range($1)]))"; }

# The fixtures hold only max_position_embeddings positions (128 and 80): a 17-token prompt and
# generation up to that limit; the embedded model a 65-token prompt and 400 tokens.
for spec in "tests/fixtures/tiny_r1 16 111 128" "tests/fixtures/tiny_b 16 63 80" "models/dsspec-tiny 64 400 1024"; do
  read -r m n_prompt n_new ctx <<<"$spec"
  for mtp in off on; do
    "$dsspec" run -m "$m" --ids "$(ids "$n_prompt")" -n "$n_new" --temp 0 --print-ids --mtp "$mtp" -t "$threads" --ctx "$ctx" \
        --ignore-eos --quiet --report "$out/$(basename $m)-$mtp.json" >/dev/null
  done
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'model':14} {'MTP':4} {'prefill tok/s':>13} {'decode tok/s':>12} {'tokens/pass':>11} {'acceptance':>10}")
for m in ("tiny_r1", "tiny_b", "dsspec-tiny"):
    for mtp in ("off", "on"):
        r = json.load(open(f"{out}/{m}-{mtp}.json"))
        print(f"{m:14} {mtp:4} {r['prefill_tokens_per_s']:13.1f} {r['decode_tokens_per_s']:12.1f} {r['tokens_per_main_pass']:11.3f} {100*r['acceptance']:9.1f}%")
PY
prompt='import numpy as np

def softmax(x):'
echo; echo "dsspec ab, embedded model, all 256 experts cacheable (compute-bound):"
"$dsspec" ab -p "$prompt" -n 1000 --temp 0 --ctx 2048 -t "$threads"
echo; echo "dsspec ab, embedded model, --mem-budget 40M (I/O-bound: a small expert cache):"
"$dsspec" ab -p "$prompt" -n 1000 --temp 0 --ctx 2048 -t "$threads" --mem-budget 40M
