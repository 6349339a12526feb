#!/usr/bin/env bash
# A night in miniature: one long generation per temperature and MTP mode, read back from the
# telemetry stream (one JSON line every --every tokens with elapsed_s, generated, drafts, accepted).
# Prints decode tok/s (the band's mean and its intervals' median), CPU ms per token (sampled from
# /proc: on a shared machine it shows the context's cost where wall-clock shows the load) and MTP
# acceptance for each context band (the prompt plus what was generated so far), so the curve a
# night follows is visible: attention grows with the context, the rest of a step does not.
#
# usage: bench/decode/long_context.sh [-m MODEL] [-n TOKENS] [--temps "0 0.6 0.8"] [-t THREADS]
#          [--kv f32|bf16] [--every N] [--build DIR] [--budget SIZE] [--mtp both|on|off]
#          [--prompt-lens "0 4096 16384"] [--ctx N] [--keep DIR]
#   defaults: the embedded model, 30000 tokens, temperatures 0 0.6 0.8, 2 threads, the engine's KV
#   default, telemetry every 64 tokens, build/, the engine's default budget, MTP both (on at every
#   temperature, off at the first one as the peer; off alone where the checkpoint has no MTP layer).
#   --prompt-lens  each run starts from a prompt of that many token ids (0: "def main():" through the
#                  tokenizer; a checkpoint without tokenizer.json needs a length > 0): a checkpoint
#                  too slow to generate a night in a bench's time (an R1-width slice) is sampled at
#                  several contexts instead, each run generating -n tokens there.
#   --ctx          the context (default: the longest prompt + TOKENS + 64).
#   --keep DIR     keep the telemetry and reports there (e.g. for dsspec report).
# needs: python3 (for the table)
set -euo pipefail
cd "$(dirname "$0")/../.."
model="" tokens=30000 temps="0 0.6 0.8" threads=2 kv="" every=64 build=build budget="" mtp=both lens=0 ctx=""
keep=""
while [ $# -gt 0 ]; do
  case "$1" in -h|--help) sed -n '2,21p' "$0"; exit 0 ;; esac
  [ $# -ge 2 ] || { echo "long_context.sh: option '$1' needs a value (see --help)" >&2; exit 2; }
  case "$1" in
    -m) model=$2 ;; -n) tokens=$2 ;; --temps) temps=$2 ;; -t) threads=$2 ;; --kv) kv=$2 ;;
    --every) every=$2 ;; --build) build=$2 ;; --budget) budget=$2 ;; --mtp) mtp=$2 ;;
    --prompt-lens) lens=$2 ;; --ctx) ctx=$2 ;; --keep) keep=$2 ;;
    *) echo "long_context.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
case "$mtp" in both|on|off) ;; *) echo "long_context.sh: --mtp '$mtp': expected both, on or off" >&2; exit 2 ;; esac
dsspec="$build/dsspec"
[ -x "$dsspec" ] || { echo "long_context.sh: $dsspec is not built (cmake --build $build)" >&2; exit 2; }
if [ -n "$keep" ]; then out=$keep; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
longest=0
for p in $lens; do [ "$p" -gt "$longest" ] && longest=$p; done
[ -n "$ctx" ] || ctx=$((longest + tokens + 64))
args=(-n "$tokens" --ignore-eos --ctx "$ctx" -t "$threads" --quiet --print-ids --telemetry-every "$every")
[ -n "$model" ] && args+=(-m "$model")
[ -n "$kv" ] && args+=(--kv-dtype "$kv")
[ -n "$budget" ] && args+=(--mem-budget "$budget")
# A checkpoint without an MTP layer runs MTP off only.
if [ "$mtp" != off ] && [ -n "$model" ] &&
   ! grep -Eq '"num_nextn_predict_layers": *[1-9]' "$model/config.json"; then
  echo "long_context.sh: $model has no MTP layer: MTP off only" >&2
  mtp=off
fi

# The prompt of a run: "def main():" or n token ids (a fixed pseudo-random walk below 4000: valid in
# every vocabulary here).
prompt_args() {
  if [ "$1" -eq 0 ]; then echo "-p" "def main():"; return; fi
  echo "--ids" "$(python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(3 + (i * 7919 + 17) % 3989) for i in range(n)))" "$1")"
}

# The run's CPU seconds (utime + stime) each time its telemetry's generated count moves, as
# "generated cpu_s" lines: CPU time per token does not count the time other work holds the cores,
# so on a shared machine it shows the context's cost where wall-clock tok/s shows the load.
cpu_sampler() {
  python3 - "$1" "$2" <<'PY'
import os, sys, time, json
pid, tele = sys.argv[1], sys.argv[2]
tick, last = os.sysconf("SC_CLK_TCK"), -1
while True:
    try:
        with open(f"/proc/{pid}/stat") as f: st = f.read().rsplit(")", 1)[1].split()
        if st[0] == "Z": break
        cpu = (int(st[11]) + int(st[12])) / tick
    except (FileNotFoundError, ProcessLookupError): break
    try:
        with open(tele, "rb") as f:
            f.seek(max(0, os.path.getsize(tele) - 65536))
            lines = f.read().split(b"\n")
        gen = next(json.loads(l)["generated"] for l in reversed(lines) if l.endswith(b"}"))
    except (FileNotFoundError, StopIteration, ValueError): gen = -1
    if gen != last and gen >= 0: print(gen, cpu, flush=True); last = gen
    time.sleep(0.01)
PY
}

runs=""
first=${temps%% *}
for p in $lens; do
  read -r pflag pval < <(prompt_args "$p")
  [ "$p" -eq 0 ] && pval="def main():"
  for t in $temps; do
    for m in on off; do
      if [ "$mtp" = both ]; then [ "$m" = on ] || [ "$t" = "$first" ] || continue
      else [ "$m" = "$mtp" ] || continue; fi
      r="$m-$t-p$p"
      "$dsspec" run "${args[@]}" "$pflag" "$pval" --temp "$t" --mtp "$m" --telemetry "$out/$r.jsonl" \
        --report "$out/$r.json" >/dev/null &
      cpu_sampler $! "$out/$r.jsonl" >"$out/$r.cpu"
      wait $!
      runs="$runs $r"
    done
  done
done

python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], sys.argv[2].split()
bands = [0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
def label(lo, hi): return f"{lo // 1024}k-{hi // 1024}k"
rows = {}
for r in runs:
    prompt = json.load(open(f"{out}/{r}.json")).get("prompt_tokens", 0)
    lines = [json.loads(l) for l in open(f"{out}/{r}.jsonl")]
    acc = {}
    for prev, cur in zip(lines, lines[1:]):
        ctx = prompt + cur["generated"]
        band = max(i for i, b in enumerate(bands) if b <= ctx)
        a = acc.setdefault(band, [0, 0.0, 0, 0, []])
        dg, dt = cur["generated"] - prev["generated"], cur["elapsed_s"] - prev["elapsed_s"]
        a[0] += dg
        a[1] += dt
        a[2] += cur["drafts"] - prev["drafts"]
        a[3] += cur["accepted"] - prev["accepted"]
        if dg > 0 and dt > 0: a[4].append(dg / dt)
    rows[r] = acc
    pts = [tuple(map(float, l.split())) for l in open(f"{out}/{r}.cpu")]
    for (g0, c0), (g1, c1) in zip(pts, pts[1:]):
        band = max(i for i, b in enumerate(bands) if b <= prompt + g1)
        if band in acc and g1 > g0: acc[band].append((g1 - g0, c1 - c0))
def title(r):
    m, t, p = r.split("-")
    return f"MTP {m}, temp {t}" + (f", prompt {p[1:]}" if p != "p0" else "")
print("decode tok/s over the band (ms/token), median of its telemetry intervals' tok/s, CPU ms/token (all")
print("threads), MTP acceptance; by context band (prompt + generated). On a shared machine the median")
print("resists other work's bursts, and CPU time per token does not count the time others hold the cores.")
print(f"{'context':>10}" + "".join(f" | {title(r):>47}" for r in runs))
for i in range(len(bands) - 1):
    if not any(i in rows[r] for r in runs): continue
    cells = []
    for r in runs:
        a = rows[r].get(i)
        if not a or a[1] <= 0 or len(a[4]) < 2: cells.append(f" | {'':>47}"); continue  # a band needs 2 intervals
        accept = f"{100.0 * a[3] / a[2]:5.1f}%" if a[2] else "    -"
        med = sorted(a[4])[len(a[4]) // 2]
        cg, cs = sum(x[0] for x in a[5:]), sum(x[1] for x in a[5:])
        cpu = f"{1e3 * cs / cg:6.2f}" if cg > 0 else "     -"
        cells.append(f" | {a[0] / a[1]:8.1f} tok/s ({1e3 * a[1] / a[0]:7.2f} ms) {med:8.1f} {cpu} {accept:>6}")
    print(f"{label(bands[i], bands[i + 1]):>10}" + "".join(cells))
for r in runs:
    rep = json.load(open(f"{out}/{r}.json"))
    print(f"{r}: prompt {rep.get('prompt_tokens', '?')} (prefill {rep.get('prefill_seconds', 0):.1f} s), "
          f"{rep.get('generated', '?')} generated, decode {rep.get('decode_tokens_per_s', 0):.2f} tok/s overall, "
          f"acceptance {100 * rep.get('acceptance', 0):.1f}%")
PY
