#!/usr/bin/env python3
"""Per-layer statistics of routing traces (cache-sim format) and their cache-sim hit rates.

A trace is JSONL (optionally .gz): one object per processed row, {"<moe layer>": [expert ids]}.
For every MoE layer it reports
  - the load histogram's summary: max/mean, min/mean, coefficient of variation (std/mean) of the
    per-expert counts, and how many experts were never chosen;
  - prev: the share of a row's experts that the previous row also chose (|S_t & S_t-1| / k);
  - last8: the share of a row's experts chosen by at least one of the previous 8 rows;
and, if --dsspec is given, `dsspec cache-sim` hit rates of lru/lfu/arc/opt with a cache of
1.3%, 3% and 10% of all (layer, expert) keys (at least 1 slot). Pure python3 (no numpy).

  python3 tools/trace_model/trace_stats.py --experts 256 --dsspec build/dsspec \\
      bench/cache/traces/r1topo_reasoning.jsonl.gz ...
  python3 tools/trace_model/trace_stats.py --experts 64 --segment-len 1024 --dsspec build/dsspec \\
      tools/embedded/trace_heldout.jsonl
"""
import argparse
import gzip
import json
import math
import os
import subprocess
import tempfile

PCTS = (1.3, 3.0, 10.0)
POLICIES = ("lru", "lfu", "arc", "opt")


def read_trace(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def layer_stats(rows, experts, segment_len=0, window=8):
    """-> {layer: stats} over the rows that carry that layer (in order)."""
    per_layer = {}
    for t, row in enumerate(rows):
        seg = t // segment_len if segment_len else 0
        for k, ids in row.items():
            per_layer.setdefault(int(k), []).append((seg, set(ids), len(ids)))
    out = {}
    for layer, seq in sorted(per_layer.items()):
        load = [0] * experts
        prev_hit = prev_n = win_hit = win_n = 0
        for i, (seg, s, k) in enumerate(seq):
            for e in s:
                load[e] += 1
            if i and seq[i - 1][0] == seg:
                prev_hit += len(s & seq[i - 1][1])
                prev_n += k
            if i >= window and seq[i - window][0] == seg:
                union = set()
                for j in range(i - window, i):
                    union |= seq[j][1]
                win_hit += len(s & union)
                win_n += k
        mean = sum(load) / experts
        var = sum((x - mean) ** 2 for x in load) / experts
        out[layer] = {"rows": len(seq), "load_max_over_mean": max(load) / mean, "load_min_over_mean": min(load) / mean,
                      "load_cv": math.sqrt(var) / mean, "experts_never_used": sum(1 for x in load if x == 0),
                      "prev_reuse": prev_hit / max(1, prev_n), "last8_reuse": win_hit / max(1, win_n),
                      "load_histogram": load}
    return out


def uniform_baseline(k, experts, window=8):
    p = k / experts
    return {"prev_reuse": p, "last8_reuse": 1 - (1 - p) ** window}


def cache_sim(dsspec, path, keys, pcts=PCTS):
    slots = [max(1, round(keys * p / 100)) for p in pcts]
    with tempfile.TemporaryDirectory() as tmp:
        plain = path
        if path.endswith(".gz"):
            plain = os.path.join(tmp, "trace.jsonl")
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                dst.write(src.read())
        out = subprocess.run([dsspec, "cache-sim", "--trace", plain, "--slots", ",".join(map(str, slots)), "--json"],
                             capture_output=True, text=True, check=True).stdout
    res = json.loads(out)
    table = {}
    for r in res["results"]:
        p = pcts[slots.index(r["slots"])]
        table.setdefault(str(p), {"slots": r["slots"]})[r["policy"]] = r["hit_rate"]
    return {"rows": res["tokens"], "requests": res["requests"], "keys": keys, "by_pct": table}


def summarize(path, experts, dsspec=None, segment_len=0):
    rows = read_trace(path)
    st = layer_stats(rows, experts, segment_len)
    k = max(len(v) for row in rows[:50] for v in row.values())
    layers = sorted(st)
    mean = {m: sum(st[l][m] for l in layers) / len(layers)
            for m in ("load_max_over_mean", "load_min_over_mean", "load_cv", "prev_reuse", "last8_reuse")}
    out = {"trace": path, "rows": len(rows), "k": k, "experts": experts, "layers": layers, "per_layer": st,
           "mean_over_layers": mean, "uniform_random": uniform_baseline(k, experts)}
    if dsspec:
        out["cache_sim"] = cache_sim(dsspec, path, len(layers) * experts)
    return out


def markdown(s, recall=None):
    lines = ["| layer | load max/mean | load min/mean | load CV | never used | prev | last 8 |" +
             (" next-layer recall |" if recall else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if recall else "")]
    for l in s["layers"]:
        x = s["per_layer"][l]
        r = recall.get(str(l)) if recall else None
        lines.append("| %d | %.2f | %.2f | %.2f | %d | %.1f%% | %.1f%% |%s" % (
            l, x["load_max_over_mean"], x["load_min_over_mean"], x["load_cv"], x["experts_never_used"],
            100 * x["prev_reuse"], 100 * x["last8_reuse"],
            (" %.1f%% |" % (100 * r) if r is not None else " - |") if recall else ""))
    m = s["mean_over_layers"]
    rm = None
    if recall:
        vals = [recall[str(l)] for l in s["layers"] if str(l) in recall]
        rm = sum(vals) / len(vals) if vals else None
    lines.append("| mean | %.2f | %.2f | %.2f | | %.1f%% | %.1f%% |%s" % (
        m["load_max_over_mean"], m["load_min_over_mean"], m["load_cv"], 100 * m["prev_reuse"], 100 * m["last8_reuse"],
        (" %.1f%% |" % (100 * rm) if rm is not None else " - |") if recall else ""))
    u = s["uniform_random"]
    lines.append("| uniform random | | | | | %.1f%% | %.1f%% |%s" % (100 * u["prev_reuse"], 100 * u["last8_reuse"],
                                                                   " %.1f%% |" % (100 * s["k"] / s["experts"]) if recall else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--experts", type=int, required=True, help="routed experts per layer")
    ap.add_argument("--segment-len", type=int, default=0,
                    help="rows per independent segment (reuse is not counted across segments)")
    ap.add_argument("--dsspec", default="", help="dsspec binary for cache-sim hit rates")
    ap.add_argument("--recall", default="", help="report.json whose routing.<layer>.next_layer_router_recall "
                                                 "(or routing.<genre>.<layer>...) to print beside")
    ap.add_argument("--recall-key", default="", help="genre key inside report.json's routing")
    ap.add_argument("--json", default="", help="write all numbers here")
    args = ap.parse_args()
    recall = None
    if args.recall:
        r = json.load(open(args.recall))["routing"]
        if args.recall_key:
            r = r[args.recall_key]
        recall = {k: v["next_layer_router_recall"] for k, v in r.items()}
    allres = []
    for path in args.traces:
        s = summarize(path, args.experts, args.dsspec or None, args.segment_len)
        allres.append(s)
        print("## %s: %d rows, k %d, %d layers x %d experts\n" % (path, s["rows"], s["k"], len(s["layers"]), args.experts))
        print(markdown(s, recall))
        if "cache_sim" in s:
            c = s["cache_sim"]
            print("\ncache-sim (%d requests, %d keys): " % (c["requests"], c["keys"]) + "; ".join(
                "%s%% = %d slots: %s" % (p, v["slots"], " ".join("%s %.1f%%" % (pol, 100 * v[pol]) for pol in POLICIES))
                for p, v in c["by_pct"].items()))
        print()
    if args.json:
        for s in allres:
            for l in s["per_layer"].values():
                l.pop("load_histogram", None)
        with open(args.json, "w") as fh:
            json.dump(allres, fh, indent=1)


if __name__ == "__main__":
    main()
