#!/usr/bin/env bash
# MTP off / on / auto across expert-cache sizes: `dsspec ab` at each point, REPEATS rounds, the
# points interleaved within a round and off/on/auto interleaved within a point (ab runs them one
# after the other, each in its own process from a cold cache), so a busy spell of the shared
# machine hits every mode and point alike.
# KIND budget: the points are --mem-budget values (each mode plans its own cache: MTP's KV layer
#   costs it slots). KIND cache: the points are --cache-gib values (every mode gets the same slots:
#   the comparison of the decode loops alone).
# Prints per point each mode's cache share, decode tokens/s as median [min, max], expert loads per
# token and the decode's CPU ms per token (both barely move with the machine's load: what the
# disk must deliver and what the cores must compute), and whether auto >= 0.97 x max(off, on) and
# auto > off wherever on > off (on medians).
#   usage: bench/decode/mtp_sweep.sh [BUILD_DIR] [REPEATS] [POINTS] [TOKENS] [KIND] -- [extra ab flags]
#   e.g.   bench/decode/mtp_sweep.sh build 3 28M,31M,35M,44M,64M 400 budget
#          bench/decode/mtp_sweep.sh build 3 0.000916,0.00184,0.00367,0.00733,0.0196 400 cache
set -euo pipefail
build=${1:-build}; repeats=${2:-3}; budgets=${3:-28M,31M,35M,44M,64M}; tokens=${4:-400}; kind=${5:-budget}
shift $(( $# < 5 ? $# : 5 )); [ "${1:-}" = "--" ] && shift
case $kind in budget) flag=--mem-budget ;; cache) flag=--cache-gib ;; *) echo "KIND must be budget or cache" >&2; exit 2 ;; esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
IFS=, read -r -a points <<< "$budgets"
for ((r = 1; r <= repeats; r++)); do
    for b in "${points[@]}"; do
        "$build/dsspec" ab "$flag" "$b" --ctx 2048 -n "$tokens" --ignore-eos --temp 0 --threads 1 \
            -p "Write a story about a robot who learns to paint." --report "$out/$b.$r.json" "$@" > /dev/null
    done
done
python3 - "$out" "$budgets" "$flag" <<'PY'
import json, statistics, sys, glob
out, budgets, flag = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
modes = ("mtp_off", "mtp_on", "mtp_auto")
print(f"{flag:>12} {'slots off/on,auto':>17} {'MTP off tok/s':>20} {'MTP on tok/s':>20} {'MTP auto tok/s':>20}"
      f" {'loads/token off/on/auto':>24} {'decode CPU ms/tok off/on/auto':>29} {'auto drafts %':>13} {'dropped':>7}  target")
ok_all, ident = True, True
for b in budgets:
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{b}.*.json"))]
    col = {m: [r[m]["decode tokens/s"] for r in runs] for m in modes}
    med = {m: statistics.median(v) for m, v in col.items()}
    loads = "/".join(f"{statistics.median(r[m]['experts loaded / token'] for r in runs):.2f}" for m in modes)
    cpu = "/".join(f"{statistics.median(r[m]['decode CPU ms / token'] for r in runs):.3f}" for m in modes)
    drafts = statistics.median(r["auto_draft_pass_pct"] for r in runs)
    dropped = statistics.median(r.get("auto_rows_dropped", 0) for r in runs)
    cell = lambda m: f"{med[m]:.0f} [{min(col[m]):.0f}, {max(col[m]):.0f}]"
    ok = med["mtp_auto"] >= 0.97 * max(med["mtp_off"], med["mtp_on"]) and (med["mtp_on"] <= med["mtp_off"] or med["mtp_auto"] > med["mtp_off"])
    ident &= all(r["outputs_identical"] for r in runs)
    ok = ok and all(r["outputs_identical"] for r in runs)
    ok_all &= ok
    share = f"{int(runs[0]['mtp_off']['expert cache slots'])}/{int(runs[0]['mtp_on']['expert cache slots'])} of {runs[0]['total_experts']}"
    print(f"{b:>12} {share:>17} {cell('mtp_off'):>20} {cell('mtp_on'):>20} {cell('mtp_auto'):>20} {loads:>24} {cpu:>29} {drafts:>13.1f} {dropped:>7.0f}  {'met' if ok else 'NOT MET'}")
print(f"{len(runs)} runs per point; outputs identical in every run: {ident}")
sys.exit(0 if ok_all else 1)
PY
