#!/usr/bin/env python3
"""What MTP can buy on R1 with every expert in memory, from the bytes each pass must read.

At R1's shapes a decode pass streams its weights from DRAM (bench_gemv: nb = 1 and 2 run at 82-92%
of the read bandwidth on the wide shapes with all threads), so a pass costs about its weight bytes.
A 1-row pass reads the resident weights and the 8 routed experts of each MoE layer; a 2-row verify
pass reads the resident weights once and the UNION of its two rows' experts; each step also runs
the MTP layer (its attention, eh_proj, shared and routed experts, and its vocabulary head). The
union comes from the trace model's MTP-on traces (tools/trace_model: R1's routing topology, rows
[last, draft] of every verify pass after a 64-row prefill). Speedup at acceptance a:

    (1 + a) x bytes(1-row pass) / (bytes(2-row pass) + bytes(MTP pass))

an upper bound for equal bandwidth efficiency (the 2-row kernels are slower per byte, see
bench_verify_cost). Usage:

    bench/decode/mtp_bytes_r1.py CONFIG.json TRACE_MTP_ON.jsonl.gz [...]
      [--layers 61] [--dense 3] [--prompt 64]

CONFIG: an R1-shaped config.json (e.g. an R1 slice's; its layer counts are replaced by --layers
and --dense: R1 has 61 layers, the first 3 dense).
"""
import argparse
import gzip
import json
import statistics


def weight_bytes(c, layers, dense):
    H, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    attn = (H * c["q_lora_rank"] + c["q_lora_rank"] * heads * (nope + rope) + H * (c["kv_lora_rank"] + rope)
            + c["kv_lora_rank"] * heads * (nope + v) + heads * v * H)          # FP8: a byte per weight
    expert = 3 * H * c["moe_intermediate_size"]                               # gate, up, down
    shared = expert * c["n_shared_experts"]
    dense_mlp = 3 * H * c["intermediate_size"]
    head = 2 * c["vocab_size"] * H                                            # BF16
    moe_layers = layers - dense
    resident = layers * attn + dense * dense_mlp + moe_layers * shared + head
    mtp_fixed = attn + shared + 2 * (2 * H) * H + head                        # eh_proj is BF16
    return dict(resident=resident, expert=expert, moe_layers=moe_layers, mtp_fixed=mtp_fixed,
                k=c["num_experts_per_tok"])


def verify_unions(path, prompt):
    """Per verify pass and layer, |experts of row 0 U experts of row 1| (lines after the prefill,
    two per pass)."""
    lines = [json.loads(l) for l in gzip.open(path, "rt")]
    body = lines[prompt:]
    unions = []
    for i in range(0, len(body) - 1, 2):
        a, b = body[i], body[i + 1]
        for layer in a:
            if layer in b:
                unions.append(len(set(a[layer]) | set(b[layer])))
    return unions, len(body) // 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--dense", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=64)
    a = ap.parse_args()
    c = json.load(open(a.config))
    w = weight_bytes(c, a.layers, a.dense)
    k, E, moe = w["k"], w["expert"], w["moe_layers"]
    one = w["resident"] + moe * k * E
    print(f"R1 shapes, {a.layers} layers ({a.dense} dense, {moe} MoE) + the MTP layer; GB = 1e9 bytes")
    print(f"  1-row pass: {one / 1e9:.1f} GB (resident {w['resident'] / 1e9:.1f} + routed {moe * k * E / 1e9:.1f}); "
          f"MTP pass: {(w['mtp_fixed'] + k * E) / 1e9:.2f} GB")
    for path in a.traces:
        unions, passes = verify_unions(path, a.prompt)
        u = statistics.mean(unions)
        two = w["resident"] + moe * u * E
        mtp = w["mtp_fixed"] + k * E
        print(f"{path}: {passes} verify passes, experts per layer of a 2-row pass: mean {u:.2f} of {2 * k} "
              f"(median {statistics.median(unions):.0f}); 2-row pass {two / 1e9:.1f} GB = {two / one:.2f}x the 1-row pass")
        print("  speedup bound at acceptance a: " +
              ", ".join(f"a = {acc:.2f}: {(1 + acc) * one / (two + mtp):.2f}x" for acc in (0.6, 0.8, 0.9, 0.95, 1.0)))


if __name__ == "__main__":
    main()
