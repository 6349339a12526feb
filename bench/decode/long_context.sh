#!/usr/bin/env bash
# A night in miniature: one long generation per temperature (MTP on), and at temperature 0 also
# with MTP off as the peer, read back from the telemetry stream (one JSON line every --every
# tokens with elapsed_s, generated, drafts, accepted). Prints decode tok/s and MTP acceptance for
# each context band (the prompt plus what was generated so far), so the curve a night follows is
# visible: attention grows with the context, the rest of a step does not.
#
# usage: bench/decode/long_context.sh [-m MODEL] [-n TOKENS] [--temps "0 0.6 0.8"] [-t THREADS]
#                                     [--kv f32|bf16] [--every N] [--build DIR] [--budget SIZE]
#   defaults: the embedded model, 30000 tokens, temperatures 0 0.6 0.8, 2 threads, the engine's
#   KV default, telemetry every 64 tokens, build/, the engine's default budget.
# needs: python3 (for the table)
set -euo pipefail
cd "$(dirname "$0")/../.."
model="" tokens=30000 temps="0 0.6 0.8" threads=2 kv="" every=64 build=build budget=""
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2 ;; -n) tokens=$2 ;; --temps) temps=$2 ;; -t) threads=$2 ;; --kv) kv=$2 ;;
    --every) every=$2 ;; --build) build=$2 ;; --budget) budget=$2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "long_context.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
dsspec="$build/dsspec"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(-p "def main():" -n "$tokens" --ignore-eos --ctx $((tokens + 64)) -t "$threads" --quiet --print-ids
      --telemetry-every "$every")
[ -n "$model" ] && args+=(-m "$model")
[ -n "$kv" ] && args+=(--kv-dtype "$kv")
[ -n "$budget" ] && args+=(--mem-budget "$budget")

runs=""
for t in $temps; do
  "$dsspec" run "${args[@]}" --temp "$t" --mtp on --telemetry "$out/on-$t.jsonl" --report "$out/on-$t.json" >/dev/null
  runs="$runs on-$t"
done
first=${temps%% *}
"$dsspec" run "${args[@]}" --temp "$first" --mtp off --telemetry "$out/off-$first.jsonl" --report "$out/off-$first.json" >/dev/null
runs="$runs off-$first"

python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], sys.argv[2].split()
bands = [0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
def label(lo, hi): return f"{lo // 1024}k-{hi // 1024}k"
rows = {}
prompt = {}
for r in runs:
    rep = json.load(open(f"{out}/{r}.json"))
    prompt[r] = rep.get("prompt_tokens", 0)
    lines = [json.loads(l) for l in open(f"{out}/{r}.jsonl")]
    prev = lines[0]
    acc = {}
    for cur in lines[1:]:
        ctx = prompt[r] + cur["generated"]
        band = max(i for i, b in enumerate(bands) if b <= ctx)
        a = acc.setdefault(band, [0, 0.0, 0, 0])
        a[0] += cur["generated"] - prev["generated"]
        a[1] += cur["elapsed_s"] - prev["elapsed_s"]
        a[2] += cur["drafts"] - prev["drafts"]
        a[3] += cur["accepted"] - prev["accepted"]
        prev = cur
    rows[r] = acc
print("decode tok/s | MTP acceptance, by context band (prompt + generated):")
head = f"{'context':>10}" + "".join(f" | {('MTP ' + r.split('-')[0] + ', temp ' + r.split('-', 1)[1]):>22}" for r in runs)
print(head)
for i in range(len(bands) - 1):
    if not any(i in rows[r] for r in runs): continue
    cells = []
    for r in runs:
        a = rows[r].get(i)
        if not a or a[1] <= 0: cells.append(f" | {'':>22}"); continue
        tps = a[0] / a[1]
        accept = f"{100.0 * a[3] / a[2]:5.1f}%" if a[2] else "    -"
        cells.append(f" | {tps:9.1f} tok/s {accept:>6}")
    print(f"{label(bands[i], bands[i + 1]):>10}" + "".join(cells))
for r in runs:
    rep = json.load(open(f"{out}/{r}.json"))
    print(f"{r}: {rep.get('generated', '?')} tokens, decode {rep.get('decode_tokens_per_s', 0):.1f} tok/s overall, "
          f"acceptance {100 * rep.get('acceptance', 0):.1f}%")
PY
