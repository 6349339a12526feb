#!/bin/sh
# Tokenizer benchmark: dsspec's tokenizer next to Hugging Face tokenizers (the reference), same
# corpus, same machine, same run, one thread each. Prints both and the ratios (>1: dsspec faster).
# usage: bench/tokenizer/run.sh BENCH_BINARY [MODEL_DIR [CORPUS_DIR [PASSES]]]
#   (needs tests/tokenizer/fetch.sh to have run: the R1 tokenizer and node_modules/tokenizers)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
model=${2:-$root/tests/data/deepseek_v3/r1}
corpus=${3:-$root/tests/tokenizer/corpus}
passes=${4:-5}
ours=$(taskset -c 0 "$bin" "$model" "$corpus" "$passes")
ref=$(taskset -c 0 node "$root/bench/tokenizer/ref_bench.js" "$model/tokenizer.json" "$corpus" "$passes")
echo "$ours"; echo "$ref"
get() { echo "$1" | awk -v k="$2" '$2 == k { print $3 }'; }
for k in encode_first_MBps encode_best_MBps decode_best_MBps; do
    awk -v k="$k" -v a="$(get "$ours" $k)" -v b="$(get "$ref" $k)" 'BEGIN { printf "ratio %s dsspec/reference = %.2f\n", k, a / b }'
done
awk -v a="$(get "$ours" load_ms_median)" -v b="$(get "$ref" load_ms_median)" \
    'BEGIN { printf "ratio load_ms reference/dsspec = %.2f (dsspec %.1f ms, limit 200 ms)\n", b / a, a }'
