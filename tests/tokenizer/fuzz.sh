#!/bin/sh
# Differential fuzz: random mixed-script strings (some with invalid UTF-8) and random id lists,
# encoded/decoded live by the reference (npm tokenizers) and compared with ours.
# usage: fuzz.sh TEST_BINARY MODEL_DIR OUT_DIR [SEED [COUNT]]   (SEED defaults to the time; it is
# printed so that a failure can be replayed)
set -eu
bin=$1 model=$2 out=$3
seed=${4:-$(date +%s)} count=${5:-2000}
here=$(cd "$(dirname "$0")" && pwd)
echo "tokenizer fuzz: seed $seed, $count strings (replay: sh $0 $bin $model $out $seed $count)"
cases=$(mktemp "$out/tokenizer_fuzz.XXXXXX")  # tests may run in parallel
trap 'rm -f "$cases"' EXIT
node "$here/ref.js" fuzz "$model/tokenizer.json" "$cases" "$seed" "$count"
"$bin" cases "$model" "$cases"
