#!/usr/bin/env python3
"""Run `dsspec eval` on the held-out ids of models/dsspec-tiny and compare with the training report.

Prints dsspec's held-out perplexity (convention of tools/embedded/evaluate.py), the fraction of
positions where its MTP draft equals its own next greedy token, and the fraction of (token, layer)
routes equal (as sets) to tools/embedded/trace_heldout.jsonl. Needs only python3 + numpy.

  python3 tools/embedded/check_engine.py --dsspec build/dsspec [--segments 8] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def log_softmax(x):
    m = x.max(1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsspec", required=True, help="path of the dsspec binary")
    ap.add_argument("--model", default=os.path.join(REPO, "models", "dsspec-tiny"))
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    held = json.load(open(os.path.join(HERE, "heldout_ids.json")))
    trace = [json.loads(line) for line in open(os.path.join(HERE, "trace_heldout.jsonl"))]
    report = json.load(open(os.path.join(HERE, "report.json")))
    V = json.load(open(os.path.join(args.model, "config.json")))["vocab_size"]
    nll = n = agree = rows = same = routes = 0
    with tempfile.TemporaryDirectory() as dump:
        for si, seg in enumerate(held["segments"][: args.segments]):
            cmd = [args.dsspec, "eval", "-m", args.model, "--ids", ",".join(map(str, seg)), "--dump", dump,
                   "--mtp", "-t", str(args.threads)]
            if subprocess.run(cmd).returncode != 0:
                sys.exit("check_engine: %s failed" % " ".join(cmd[:3]))
            T = len(seg)
            logits = np.fromfile(os.path.join(dump, "logits.f32"), "<f4").reshape(T, V).astype(np.float64)
            lp = log_softmax(logits)
            nll -= lp[np.arange(T - 1), seg[1:]].sum()
            n += T - 1
            mtp = np.fromfile(os.path.join(dump, "mtp_logits.f32"), "<f4").reshape(T, V)
            agree += (mtp[: T - 2].argmax(1) == logits[1: T - 1].argmax(1)).sum()
            rows += T - 2
            for layer, per_token in json.load(open(os.path.join(dump, "routes.json"))).items():
                for t, experts in enumerate(per_token):
                    same += set(experts) == set(trace[si * T + t][layer])
                    routes += 1
    ref = report["ppl_fp8_export_transformers_float64"]["ppl"] if args.segments == len(held["segments"]) else None
    print("dsspec held-out ppl %.6f over %d tokens (transformers float64 on the same export: %s)" % (
        np.exp(nll / n), n, "%.6f" % ref if ref else "n/a for a subset"))
    print("dsspec MTP draft == own next greedy token: %.4f of %d positions (report: %.4f)" % (
        agree / rows, rows, report["mtp"]["mtp_matches_main_greedy"]))
    print("routes equal to trace_heldout.jsonl: %.4f of %d (token, layer) pairs" % (same / routes, routes))


if __name__ == "__main__":
    main()
