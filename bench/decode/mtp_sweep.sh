#!/usr/bin/env bash
# MTP off / on / auto across expert-cache sizes: `dsspec ab` at each --mem-budget, REPEATS rounds,
# the budgets interleaved within a round so a busy spell of the shared machine hits every point.
# Prints per budget the cache share and each mode's decode tokens/s as median [min, max], and
# whether auto >= 0.97 x max(off, on) and auto > off wherever on > off (on medians).
#   usage: bench/decode/mtp_sweep.sh [BUILD_DIR] [REPEATS] [BUDGETS] [TOKENS] -- [extra ab flags]
#   e.g.   bench/decode/mtp_sweep.sh build 3 31M,34M,42M,60M 400
set -euo pipefail
build=${1:-build}; repeats=${2:-3}; budgets=${3:-31M,34M,42M,60M}; tokens=${4:-400}
shift $(( $# < 4 ? $# : 4 )); [ "${1:-}" = "--" ] && shift
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
IFS=, read -r -a points <<< "$budgets"
for ((r = 1; r <= repeats; r++)); do
    for b in "${points[@]}"; do
        "$build/dsspec" ab --mem-budget "$b" --ctx 2048 -n "$tokens" --ignore-eos --temp 0 --threads 1 \
            -p "Write a story about a robot who learns to paint." --report "$out/$b.$r.json" "$@" > /dev/null
    done
done
python3 - "$out" "$budgets" <<'PY'
import json, statistics, sys, glob
out, budgets = sys.argv[1], sys.argv[2].split(",")
print(f"{'budget':>7} {'cached':>12} {'MTP off tok/s':>22} {'MTP on tok/s':>22} {'MTP auto tok/s':>22} {'auto drafts %':>13}  target")
ok_all = True
for b in budgets:
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{b}.*.json"))]
    col = {m: [r[m]["decode tokens/s"] for r in runs] for m in ("mtp_off", "mtp_on", "mtp_auto")}
    med = {m: statistics.median(v) for m, v in col.items()}
    drafts = statistics.median(r["auto_draft_pass_pct"] for r in runs)
    cell = lambda m: f"{med[m]:.0f} [{min(col[m]):.0f}, {max(col[m]):.0f}]"
    ok = med["mtp_auto"] >= 0.97 * max(med["mtp_off"], med["mtp_on"]) and (med["mtp_on"] <= med["mtp_off"] or med["mtp_auto"] > med["mtp_off"])
    ok = ok and all(r["outputs_identical"] for r in runs)
    ok_all &= ok
    share = f"{runs[0]['cache_slots']}/{runs[0]['total_experts']}"
    print(f"{b:>7} {share:>12} {cell('mtp_off'):>22} {cell('mtp_on'):>22} {cell('mtp_auto'):>22} {drafts:>13.1f}  {'met' if ok else 'NOT MET'}")
print(f"{len(runs)} runs per point; outputs identical in every run: {all(r['outputs_identical'] for r in runs)}")
sys.exit(0 if ok_all else 1)
PY
