#!/usr/bin/env python3
"""The router lookahead's recorded guesses beside a routing trace: the compact file format.

train_trace_model.py records, for every row of a trace and every layer l, the ranked guesses
dsspec's prefetch_ahead (core/model.c) would hand the cache for layers l+1 and l+2 (guesses_<g>.npz:
ids_d<d> [rows][layers][ranks], 255 where l+d is no MoE layer). This script writes them as the file
bench_prefetch_sim and r1_replay read (cache/guess_trace.c), and reads it back to check.

Format (the whole file gzip-compressed):
    "DSGUESS1"                           8 bytes
    rows                                 u32 little-endian (= the route trace's lines)
    n_experts                            u16 (<= 256)
    depth D                              u8
    ranks[D]                             u8 each: guesses kept per row at depth d (most confident first)
    for d = 1..D: n_targets u8, then the target MoE layers (u8 each, ascending): layers l+d whose
                  guesses from layer l are stored
    for d = 1..D, for each target layer t of d, for each row: ranks[d] bytes
A byte is the guess's index in a permutation of the experts that the reader rebuilds from the
route trace, so that the likely guesses get small, frequent codes (gzip then stores a correct
guess in ~3 bits instead of 8): at depth 1, the row's real experts of layer t (ascending), then
all other experts (ascending); at depth d >= 2, the same real experts, then the row's depth-1
guesses for t that are not among them (in rank order), then the rest (ascending).

usage: guess_trace.py write --npz guesses_code.npz --trace r1topo_code.jsonl.gz --ranks 10 8 --out F
       guess_trace.py write --dsspec D1 D2 ... --trace T --ranks 12 8 --experts 64 --out F
           (from `dsspec eval --dump Di --guesses N` of consecutive segments of the trace's rows)
       guess_trace.py check --npz ... --trace ... --file F      (decodes F, compares with the npz)
"""
import argparse
import gzip
import json
import struct
import sys

import numpy as np

MAGIC = b"DSGUESS1"


def load_trace(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as fh:
        return [{int(k): sorted(v) for k, v in json.loads(line).items()} for line in fh if line.strip()]


def permutation(front, n_experts):
    seen = set(front)
    return list(front) + [e for e in range(n_experts) if e not in seen]


def reference(route, d1_guess, d, n_experts):
    front = list(route)
    if d >= 2:
        front += [e for e in d1_guess if e not in route]
    return permutation(front, n_experts)


def encode(npz, trace, ranks, n_experts):
    rows = len(trace)
    ids = {d: npz["ids_d%d" % d].astype(np.int64) for d in range(1, len(ranks) + 1)}
    targets = {}
    for d in ids:
        if ids[d].shape[0] != rows:
            raise SystemExit("npz has %d rows, the trace %d" % (ids[d].shape[0], rows))
        if ids[d].shape[2] < ranks[d - 1]:
            raise SystemExit("depth %d: %d ranks recorded, %d asked" % (d, ids[d].shape[2], ranks[d - 1]))
        targets[d] = [s + d for s in range(ids[d].shape[1]) if ids[d][0, s, 0] != 255 and (s + d) in trace[0]]
    if any(t not in targets[1] for d in targets for t in targets[d]):
        raise SystemExit("every deeper target needs its depth-1 guesses")
    head = MAGIC + struct.pack("<IHB", rows, n_experts, len(ranks)) + bytes(ranks)
    for d in targets:
        head += bytes([len(targets[d])] + targets[d])
    body = bytearray()
    for d in targets:
        n = ranks[d - 1]
        for t in targets[d]:
            for r in range(rows):
                d1 = ids[1][r, t - 1, : ranks[0]].tolist()
                index = {e: i for i, e in enumerate(reference(trace[r][t], d1, d, n_experts))}
                body += bytes(index[int(e)] for e in ids[d][r, t - d, :n])
    return head + bytes(body)


def decode(data, trace):
    if data[:8] != MAGIC:
        raise SystemExit("not a DSGUESS1 file")
    rows, n_experts, depth = struct.unpack_from("<IHB", data, 8)
    pos = 15
    ranks = list(data[pos : pos + depth])
    pos += depth
    targets = {}
    for d in range(1, depth + 1):
        n = data[pos]
        targets[d] = list(data[pos + 1 : pos + 1 + n])
        pos += 1 + n
    out = {}
    for d in range(1, depth + 1):
        n = ranks[d - 1]
        for t in targets[d]:
            g = np.empty((rows, n), dtype=np.int64)
            for r in range(rows):
                d1 = out[(1, t)][r].tolist() if d >= 2 else []
                perm = reference(trace[r][t], d1, d, n_experts)
                g[r] = [perm[c] for c in data[pos : pos + n]]
                pos += n
            out[(d, t)] = g
    if pos != len(data):
        raise SystemExit("trailing bytes")
    return ranks, out


def from_dsspec(dirs, layers):
    """guesses.json of `dsspec eval --guesses` over consecutive segments -> npz-like arrays
    ids_d<d> [rows][layers][ranks] (255 where no layer l+d is guessed)."""
    segs = [json.load(open(d + "/guesses.json")) for d in dirs]
    lists = [(si, int(src), int(tgt) - int(src), np.array(rows, dtype=np.int64))
             for si, g in enumerate(segs) for src, targets in g.items() for tgt, rows in targets.items()]
    seg_rows = [next(a.shape[0] for s, _, _, a in lists if s == si) for si in range(len(segs))]
    starts = np.cumsum([0] + seg_rows)
    out = {}
    for d in sorted({x[2] for x in lists}):
        n = max(a.shape[1] for _, _, dd, a in lists if dd == d)
        arr = np.full((starts[-1], layers, n), 255, dtype=np.int64)
        for si, src, dd, a in lists:
            if dd == d:
                arr[starts[si] : starts[si] + a.shape[0], src, :] = a
        out["ids_d%d" % d] = arr
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=("write", "check"))
    ap.add_argument("--npz")
    ap.add_argument("--dsspec", nargs="+", help="dump directories of dsspec eval --guesses, in row order")
    ap.add_argument("--trace", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[10, 8])
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--out")
    ap.add_argument("--file")
    a = ap.parse_args()
    trace = load_trace(a.trace)
    layers = max(max(r) for r in trace) + 1
    npz = np.load(a.npz) if a.npz else from_dsspec(a.dsspec, layers)
    if a.cmd == "write":
        with gzip.open(a.out, "wb", compresslevel=9) as fh:
            fh.write(encode(npz, trace, a.ranks, a.experts))
        return
    with gzip.open(a.file, "rb") as fh:
        ranks, got = decode(fh.read(), trace)
    bad = 0
    for (d, t), g in got.items():
        bad += int((g != npz["ids_d%d" % d][:, t - d, : ranks[d - 1]]).sum())
    print("%s: %d (depth, layer) lists, ranks %s, %d entries differ" % (a.file, len(got), ranks, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
