#!/usr/bin/env python3
"""Train the routing-trace model (R1's MoE routing topology at toy width) and record its traces.

A DeepseekV3ForCausalLM whose MoE layers route exactly as R1's do: 256 routed experts, 8 groups,
top-4 groups, top-8 experts, one shared expert, sigmoid scores with noaux_tc correction biases
learned by aux-loss-free balancing, norm_topk_prob, routed_scaling_factor 2.5; 1 dense + 20 MoE
layers and one MTP layer, hidden 128, trained for a few minutes on one GPU on mixed text (code,
prose, documentation, synthetic step-by-step reasoning in R1's chat format). See README.md beside
this file for what was run and the numbers.

Reuses dsspec-tiny's machinery (tools/train_embedded.py and tools/embedded/: the model, training
loop, balancing rule, FP8 export, transformers gate, evaluation); what is new here is the corpus
mixture, the held-out contexts per genre, the MTP-on trace and the dsspec routing check.

Stages: corpus (+ carried prose/docs) -> mixed-corpus BPE -> token ids -> [20 steps, export,
transformers float64 gate] -> time-limited training -> FP8 export -> reload (float64) -> per genre:
perplexity, routing statistics, trace; MTP-on traces -> `dsspec eval` routes vs the traces.
"""
import argparse
import gzip
import json
import lzma
import math
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
REPO = os.path.dirname(TOOLS)
sys.path.insert(0, os.path.join(TOOLS, "embedded"))
sys.path.insert(0, TOOLS)
sys.path.insert(0, HERE)

import corpus  # noqa: E402
import evaluate  # noqa: E402
import reasoning_gen  # noqa: E402
import tokenizer_build  # noqa: E402
import train_embedded as te  # noqa: E402
from tiny_model import MoE, TinyDeepseek, apply_rope_interleaved  # noqa: E402

PRESETS = {
    # R1's routing topology; widths small enough to train in minutes.
    "full": dict(vocab_size=4096, hidden_size=128, intermediate_size=384, moe_intermediate_size=32,
                 num_hidden_layers=21, first_k_dense_replace=1, num_attention_heads=4, q_lora_rank=64,
                 kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32,
                 n_routed_experts=256, num_experts_per_tok=8, n_group=8, topk_group=4,
                 routed_scaling_factor=2.5, rope_factor=40, original_max_position_embeddings=4096),
    # every stage in seconds on a CPU (same routing topology, 3 MoE layers)
    "dry": dict(vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=16,
                num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=2, q_lora_rank=32,
                kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16,
                n_routed_experts=256, num_experts_per_tok=8, n_group=8, topk_group=4,
                routed_scaling_factor=2.5, rope_factor=40, original_max_position_embeddings=4096),
}
GENRES = ("code", "prose", "docs", "reasoning")
REASONING_TRAIN_SEED, REASONING_HELDOUT_SEED = 1, 1_000_003


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full")
    ap.add_argument("--roots", nargs="+", default=te.DEFAULT_ROOTS, help="directories of .py text (code genre)")
    ap.add_argument("--carried", default=os.path.join(REPO, ".trace_carry", "corpus.jsonl.gz"),
                    help="prose and docs documents from prepare_corpus.py")
    ap.add_argument("--out-dir", default="/tmp/trace-model", help="where the FP8 snapshot goes")
    ap.add_argument("--report-dir", default="/tmp/trace-results")
    ap.add_argument("--code-mb", type=float, default=45)
    ap.add_argument("--reasoning-mb", type=float, default=25)
    ap.add_argument("--prose-repeat", type=int, default=2, help="prose is scarce: repeat its documents")
    ap.add_argument("--tokenizer-sample-mb", type=float, default=30)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context-tokens", type=int, default=4096, help="held-out context per genre")
    ap.add_argument("--prompt-tokens", type=int, default=64, help="prefill rows before MTP-on decoding")
    ap.add_argument("--train-seconds", type=float, default=300)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--total-seconds", type=float, default=0)
    ap.add_argument("--eval-reserve", type=float, default=150)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup-steps", type=int, default=150)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-speed", type=float, default=1e-3)
    ap.add_argument("--gate-steps", type=int, default=20)
    ap.add_argument("--gate-tokens", type=int, default=1024, help="tokens of 2 contexts for the gate")
    ap.add_argument("--n-shards", type=int, default=5)
    ap.add_argument("--guess-ranks", type=int, nargs=2, default=[16, 8],
                    help="lookahead guesses recorded per row for layer l+1 and l+2")
    ap.add_argument("--mtp-guess-genres", nargs="*", default=["reasoning", "code"],
                    help="genres whose MTP-on trace also gets the lookahead's guesses")
    ap.add_argument("--dsspec", default="", help="dsspec binary: check its routes against the traces")
    ap.add_argument("--dsspec-libdir", default="", help="LD_LIBRARY_PATH for the dsspec binary only")
    ap.add_argument("--dsspec-threads", type=int, default=16)
    ap.add_argument("--dsspec-timeout", type=float, default=90)
    ap.add_argument("--allow-byte-tokenizer", action="store_true")
    ap.add_argument("--skip-transformers", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    return ap.parse_args()


log = te.log


# ---------------------------------------------------------------------------------------------
# data

def load_carried(path):
    docs = []
    opener = lzma.open if path.endswith(".xz") else gzip.open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            docs.append(json.loads(line))
    return docs


def make_tokenizer(args, texts, vocab_size):
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        if not args.allow_byte_tokenizer:
            raise SystemExit("tokenizers library missing (use --allow-byte-tokenizer only for a dry run)")
        log("tokenizers missing: byte tokenizer (dry run)")
        return tokenizer_build.ByteTokenizer()
    rng = random.Random(7)
    order = list(range(len(texts)))
    rng.shuffle(order)

    def sample():
        used = 0
        for i in order:
            if used > args.tokenizer_sample_mb * 1e6:
                break
            used += len(texts[i])
            yield texts[i]

    path = os.path.join(args.out_dir, "tokenizer.json")
    tok = tokenizer_build.train_bpe(sample(), vocab_size, path)
    log("tokenizer: %d ids, written to %s" % (tok.get_vocab_size(True), path))
    return tokenizer_build.HFTokenizer(tok)


def build_context(tok, docs, n):
    """Held-out documents in order, each [BOS] text [EOS], until n tokens: one contiguous context."""
    ids, used = [], []
    for name, text in docs:
        if len(ids) >= n:
            break
        ids.extend([0] + tok.encode_batch([text])[0] + [1])
        used.append(name)
    if len(ids) < n:
        raise SystemExit("held-out text gives %d tokens, %d needed" % (len(ids), n))
    return {"docs": used, "ids": [int(x) for x in ids[:n]]}


def prepare_data(args, vocab_size):
    roots = [r for r in args.roots if os.path.isdir(r)]
    code_train, code_held, code_stats = corpus.collect(roots, args.code_mb * 1e6, 1.5e6)
    chat = corpus.chat_documents(code_train, workers=min(16, os.cpu_count() or 1))
    carried = load_carried(args.carried)
    reasoning, size, seed = [], 0, REASONING_TRAIN_SEED
    while size < args.reasoning_mb * 1e6:  # blocks of 2000 documents, seeds 1, 2, 3, ...
        for t in reasoning_gen.documents(2000, seed):
            reasoning.append(t)
            size += len(t.encode())
        seed += 1
    train = [("code", t) for _, t in code_train] + [("code-chat", t) for t in chat] \
        + [("reasoning", t) for t in reasoning]
    for d in carried:
        if d["split"] == "train":
            train += [(d["genre"], d["text"])] * (args.prose_repeat if d["genre"] == "prose" else 1)
    stats = {"code": code_stats, "code_chat_documents": len(chat), "reasoning_documents": len(reasoning),
             "carried_documents": len(carried)}
    by_genre = {}
    for g, t in train:
        n, b = by_genre.get(g, (0, 0))
        by_genre[g] = (n + 1, b + len(t.encode()))
    stats["train_bytes_by_genre"] = {g: {"documents": n, "bytes": b} for g, (n, b) in sorted(by_genre.items())}
    log("corpus: %s" % json.dumps(stats))

    tok = make_tokenizer(args, [t for _, t in train], vocab_size)
    order = np.random.default_rng(args.seed).permutation(len(train))
    train_ids = te.pack(tok, [train[i][1] for i in order])
    stats["train_tokens"] = int(len(train_ids))
    stats["train_bytes"] = int(sum(b for _, b in by_genre.values()))
    log("tokens: train %d (%.2f bytes/token)" % (len(train_ids), stats["train_bytes"] / len(train_ids)))

    held = {
        "code": code_held,
        "prose": [(d["source"] + ":" + d["name"], d["text"]) for d in carried
                  if d["split"] == "heldout" and d["genre"] == "prose"],
        "docs": [(d["source"] + ":" + d["name"], d["text"]) for d in carried
                 if d["split"] == "heldout" and d["genre"] == "docs"],
        "reasoning": [("reasoning_gen seed %d doc %d" % (REASONING_HELDOUT_SEED, i), t)
                      for i, t in enumerate(reasoning_gen.documents(60, REASONING_HELDOUT_SEED))],
    }
    contexts = {g: build_context(tok, held[g], args.context_tokens) for g in GENRES}
    for g, c in contexts.items():
        log("held-out %s: %d tokens from %d documents (%s ...)" % (g, len(c["ids"]), len(c["docs"]), c["docs"][0]))
    return tok, train_ids, contexts, stats


# ---------------------------------------------------------------------------------------------
# traces

def ascending_rows(trace):
    return [{k: sorted(v) for k, v in row.items()} for row in trace]


def write_jsonl_gz(path, rows):
    with gzip.open(path, "wt", compresslevel=9) as fh:
        for row in rows:
            fh.write(json.dumps(row, separators=(",", ":")) + "\n")


def masked_attention(a, x, cos, sin, allowed):
    """MLAttention.forward (tiny_model) with an explicit [R, R] mask instead of the causal one."""
    B, T, _ = x.shape
    q = a.q_b_proj(a.q_a_layernorm(a.q_a_proj(x))).view(B, T, a.nh, -1).transpose(1, 2)
    q_nope, q_rot = q.split([a.nope, a.rope], dim=-1)
    latent, k_rot = a.kv_a_proj_with_mqa(x).split([a.kv_rank, a.rope], dim=-1)
    kv = a.kv_b_proj(a.kv_a_layernorm(latent)).view(B, T, a.nh, -1).transpose(1, 2)
    k_nope, v = kv.split([a.nope, a.vdim], dim=-1)
    q_rot = apply_rope_interleaved(q_rot, cos, sin)
    k_rot = apply_rope_interleaved(k_rot.unsqueeze(1), cos, sin).expand(B, a.nh, T, a.rope)
    q = torch.cat((q_nope, q_rot), dim=-1)
    k = torch.cat((k_nope, k_rot), dim=-1)
    att = torch.matmul(q, k.transpose(-1, -2)) * a.scale
    att = att.masked_fill(~allowed, float("-inf")).softmax(-1)
    return a.o_proj(torch.matmul(att, v).transpose(1, 2).reshape(B, T, -1))


@torch.no_grad()
def routes_with_extra_rows(model, ids, extra_tok, extra_pos):
    """Main-model routes of the context rows and of extra rows: extra row r is token extra_tok[r] at
    position extra_pos[r], seeing the context's rows 0..extra_pos[r]-1 and itself (exactly a verify
    pass's draft row after that prefix). -> {moe layer: [T + N, k] ids}."""
    dev = model.embed_tokens.weight.device
    T, N = len(ids), len(extra_tok)
    allids = torch.tensor([list(ids) + list(extra_tok)], device=dev)
    pos = torch.cat([torch.arange(T), torch.tensor(extra_pos, dtype=torch.long)]).to(dev)
    cos_t, sin_t = model.rope_tables(T, dev)
    cos, sin = cos_t[pos], sin_t[pos]
    allowed = torch.zeros(T + N, T + N, dtype=torch.bool, device=dev)
    allowed[:T, :T] = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
    allowed[T:, :T] = torch.arange(T, device=dev)[None, :] < pos[T:, None]
    allowed[torch.arange(T, T + N), torch.arange(T, T + N)] = True
    x = model.embed_tokens(allids)
    out, resid = {}, {}
    for i, layer in enumerate(model.layers):
        h = x + masked_attention(layer.self_attn, layer.input_layernorm(x), cos, sin, allowed)
        resid[i] = h[0]
        x = h + layer.mlp(layer.post_attention_layernorm(h))
        if isinstance(layer.mlp, MoE):
            out[i] = layer.mlp.last_ids.clone()
    return out, resid


def router_rank(gate, logits, n):
    """core/router.c router_rank over rows: the noaux_tc choice (sigmoid score + correction bias)
    picks the top groups by the sum of their two best choices, then experts of the kept groups by
    choice descending, then the others the same way (lower id first on a tie, as argmax_untaken).
    logits [R, E] -> (ids [R, n] long, sigmoid scores [R, n])."""
    score = torch.sigmoid(logits)
    choice = score + gate.e_score_correction_bias.to(logits.dtype)
    R, E = choice.shape
    grouped = choice.view(R, gate.n_group, E // gate.n_group)
    group_score = grouped.topk(2, dim=-1).values.sum(-1)
    # stable descending sort: the lower group index first on a tie, as argmax_untaken
    keep = group_score.sort(dim=-1, descending=True, stable=True).indices[:, : gate.topk_group]
    kept = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, keep, True)
    kept_e = kept.unsqueeze(-1).expand_as(grouped).reshape(R, E)
    # every choice is < 1 + max bias, so kept experts rank before all others
    key = choice + kept_e.to(choice.dtype) * (4.0 + choice.abs().max())
    ids = key.sort(dim=-1, descending=True, stable=True).indices[:, :n]
    return ids, score.gather(1, ids)


def lookahead_from_residuals(model, resid, ranks):
    """dsspec's prefetch_ahead (core/model.c): at layer l, layer l's residual after its attention
    (the input of its post_attention_layernorm), normalized with layer l+d's
    post_attention_layernorm, through layer l+d's router, ranked by router_rank.
    resid: {layer: [R, H]}; ranks: guesses kept per depth (depth d = ranks[d-1]).
    -> {depth: (ids uint8 [R, L, n], scores uint8 [R, L, n])}, 255/0 where l+d is not a MoE layer."""
    L = len(model.layers)
    R = next(iter(resid.values())).shape[0]
    out = {}
    for d, n in enumerate(ranks, start=1):
        ids = np.full((R, L, n), 255, dtype=np.uint8)
        sc = np.zeros((R, L, n), dtype=np.uint8)
        for li in range(L):
            t = li + d
            if t >= L or not isinstance(model.layers[t].mlp, MoE):
                continue
            gate = model.layers[t].mlp.gate
            xn = model.layers[t].post_attention_layernorm(resid[li])
            logits = F.linear(xn.to(torch.float64), gate.weight.to(torch.float64))
            g, s = router_rank(gate, logits, n)
            ids[:, li] = g.cpu().numpy().astype(np.uint8)
            sc[:, li] = (s * 255).round().clamp(0, 255).cpu().numpy().astype(np.uint8)
        out[d] = (ids, sc)
    return out


@torch.no_grad()
def lookahead_guesses(model, ids, ranks):
    """The lookahead's ranked guesses for every row of one causal pass over ids, and the pass's
    routes (to check that they are the trace's)."""
    dev = model.embed_tokens.weight.device
    t = torch.tensor([ids], device=dev)
    cos, sin = model.rope_tables(t.shape[1], dev)
    x = model.embed_tokens(t)
    resid, routes = {}, {}
    for i, layer in enumerate(model.layers):
        h = x + layer.self_attn(layer.input_layernorm(x), cos, sin)
        resid[i] = h[0]
        x = h + layer.mlp(layer.post_attention_layernorm(h))
        if isinstance(layer.mlp, MoE):
            routes[i] = layer.mlp.last_ids.clone()
    return lookahead_from_residuals(model, resid, ranks), routes


def save_guesses(path, guesses, rows=None):
    arrays = {}
    for d, (g, s) in guesses.items():
        arrays["ids_d%d" % d] = g if rows is None else g[rows]
        arrays["scores_d%d" % d] = s if rows is None else s[rows]
    np.savez_compressed(path, **arrays)


def guess_recall(guesses, trace, k):
    """Per depth and layer: share of layer l+d's real top-k among the first k guesses made at l."""
    out = {}
    for d, (g, _) in guesses.items():
        per = {}
        for li in range(g.shape[1]):
            t = li + d
            if g[0, li, 0] == 255:
                continue
            hit = sum(len(set(g[r, li, :k].tolist()) & set(trace[r][str(t)])) for r in range(len(trace)))
            per[str(t)] = hit / (len(trace) * k)
        out["depth%d" % d] = per
    return out


@torch.no_grad()
def mtp_on_trace(model, ids, prompt, ranks=()):
    """dsspec's MTP-on decode loop (speculate/generate.c) replayed over a held-out context, the
    emitted tokens being the context's own (as if the sampler had produced exactly this text):
      - prefill: rows 0..prompt-1, one trace line each;
      - then every verify pass processes two rows [last, draft] at positions [L, L+1]: the draft is
        the MTP layer's argmax from (h_{L-1}, x_L); it is accepted iff it equals x_{L+1} (then
        L += 2), else L += 1 and the draft row is a row of the wrong token, routed here exactly;
      - the MTP layer runs on the accepted rows after each pass (its routes are separate lines
        {"<mtp layer>": [...]} in the "with_mtp_layer" variant; dsspec's --trace-out has only the
        main rows).
    -> (main rows, rows with MTP-layer lines, stats, lookahead guesses of the main rows or None)."""
    dev = model.embed_tokens.weight.device
    T = len(ids)
    t = torch.tensor([ids], device=dev)
    _, mtp_logits, _ = model(t)
    mtp_layer = model.cfg["num_hidden_layers"]
    mtp_routes = model.mtp.block.mlp.last_ids.cpu().tolist()  # row i: (h_i, x_{i+1})
    drafts = mtp_logits[0].argmax(-1).cpu().tolist()            # row i drafts x_{i+2}
    plan = []  # ("main", pos) | ("sub", pos, token) | ("mtp", row)
    for p in range(prompt):
        plan.append(("main", p))
    plan += [("mtp", i) for i in range(prompt - 1)]
    L = prompt
    plan.append(("mtp", L - 1))
    drafts_n = accepted = 0
    while L + 1 <= T - 1:
        d = drafts[L - 1]
        drafts_n += 1
        plan.append(("main", L))
        if d == ids[L + 1]:
            accepted += 1
            plan.append(("main", L + 1))
            plan += [("mtp", i) for i in (L, L + 1) if i <= T - 2]
            L += 2
        else:
            plan.append(("sub", L + 1, d))
            plan.append(("mtp", L))
            L += 1
    subs = [x for x in plan if x[0] == "sub"]
    routes, resid = routes_with_extra_rows(model, ids, [s[2] for s in subs], [s[1] for s in subs])
    # the context rows of the masked pass must route as the plain causal pass does
    plain = evaluate.routed_forward(model, t)
    agree = sum((routes[li][:T].sort(-1).values == plain[li][1].sort(-1).values).all(-1).sum().item()
                for li in plain)
    sub_index = {}
    for j, s in enumerate(subs):
        sub_index[(s[1], s[2])] = T + j
    cpu = {li: r.cpu().tolist() for li, r in routes.items()}
    main_rows, ext_rows, row_of = [], [], []
    for x in plan:
        if x[0] == "mtp":
            ext_rows.append({str(mtp_layer): sorted(mtp_routes[x[1]])})
            continue
        r = x[1] if x[0] == "main" else sub_index[(x[1], x[2])]
        row = {str(li): sorted(cpu[li][r]) for li in sorted(cpu)}
        row_of.append(r)
        main_rows.append(row)
        ext_rows.append(row)
    guesses = None
    if ranks:
        full = lookahead_from_residuals(model, resid, ranks)
        guesses = {d: (g[row_of], s[row_of]) for d, (g, s) in full.items()}
    stats = {"context_tokens": T, "prompt_rows": prompt, "verify_passes": drafts_n, "accepted": accepted,
             "acceptance": accepted / max(1, drafts_n), "main_rows": len(main_rows),
             "rejected_draft_rows": len(subs), "mtp_layer_rows": len(ext_rows) - len(main_rows),
             "masked_pass_matches_causal_pass": agree / (T * len(plain))}
    return main_rows, ext_rows, stats, guesses


# ---------------------------------------------------------------------------------------------
# dsspec routing check

def dsspec_check(args, contexts, traces, tmp):
    out = {}
    for g in GENRES:
        ids_file = os.path.join(tmp, "ids_%s.txt" % g)
        with open(ids_file, "w") as fh:
            fh.write(" ".join(map(str, contexts[g]["ids"])))
        dump = os.path.join(tmp, "dump_%s" % g)
        cmd = [args.dsspec, "eval", "-m", args.out_dir, "--ids-file", ids_file, "--dump", dump, "--ppl",
               "-t", str(args.dsspec_threads)]
        t0 = time.time()
        try:
            env = dict(os.environ)
            if args.dsspec_libdir:
                env["LD_LIBRARY_PATH"] = args.dsspec_libdir
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.dsspec_timeout, env=env)
        except subprocess.TimeoutExpired:
            out[g] = {"error": "timeout after %.0f s" % args.dsspec_timeout}
            log("dsspec %s: timeout" % g)
            continue
        res = {"rc": p.returncode, "seconds": round(time.time() - t0, 1), "stdout": p.stdout[-400:],
               "stderr": p.stderr[-400:]}
        if p.returncode == 0:
            routes = json.load(open(os.path.join(dump, "routes.json")))
            same = n = 0
            for layer, per_token in routes.items():
                for t, experts in enumerate(per_token):
                    same += sorted(experts) == traces[g][t][layer]
                    n += 1
            res.update(route_pairs=n, route_pairs_equal=same, equal_fraction=same / max(1, n),
                       layers=len(routes))
        out[g] = res
        log("dsspec %s: %s" % (g, json.dumps({k: v for k, v in res.items() if k not in ("stderr",)})))
    return out


# ---------------------------------------------------------------------------------------------

def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    os.makedirs(args.out_dir, exist_ok=True)
    os.makedirs(args.report_dir, exist_ok=True)
    for f in os.listdir(args.out_dir):
        if f.endswith(".safetensors"):
            os.remove(os.path.join(args.out_dir, f))
    cfg = r1cfg = te.r1_format.deepseek_config(**PRESETS[args.preset])
    report = {"preset": args.preset, "args": vars(args), "device": str(device), "torch": torch.__version__,
              "config": {k: r1cfg[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                               "first_k_dense_replace", "n_routed_experts", "num_experts_per_tok",
                                               "n_group", "topk_group", "n_shared_experts", "routed_scaling_factor",
                                               "moe_intermediate_size", "intermediate_size")}}

    def save():
        with open(os.path.join(args.report_dir, "report.json"), "w") as fh:
            json.dump(report, fh, indent=1, ensure_ascii=False, default=str)

    tok, train_ids, contexts, stats = prepare_data(args, cfg["vocab_size"])
    report["data"] = stats
    with open(os.path.join(args.report_dir, "heldout_contexts.json"), "w") as fh:
        json.dump({"tokenizer": "tokenizer.json of the trace model (in this folder)", "contexts": contexts}, fh)
    tokenizer_build.write_configs(args.out_dir, os.path.join(REPO, "tests/tokenizer/data/r1_chat_template.jinja"),
                                  cfg["max_position_embeddings"])
    save()

    model = TinyDeepseek(cfg).to(device)
    report["parameters"] = sum(p.numel() for p in model.parameters())
    log("model: %d parameters" % report["parameters"])
    history = []
    tmp = tempfile.mkdtemp(prefix="trace-model-")
    if args.gate_steps and not args.skip_transformers:
        while True:  # the first steps also find out whether the batch fits in memory
            try:
                te.train(model, train_ids, args, device, 0, args.gate_steps, history)
                break
            except torch.cuda.OutOfMemoryError:
                if args.batch == 1:
                    raise
                args.batch //= 2
                torch.cuda.empty_cache()
                log("out of memory: batch %d" % args.batch)
        gate_segments = [contexts[g]["ids"][: args.gate_tokens] for g in ("reasoning", "prose")]
        try:
            report["consistency_gate"] = te.consistency_gate(model, cfg, gate_segments, device, tmp)
        except SystemExit as e:  # record and go on: the traces are still worth having, flagged
            report["consistency_gate"] = {"failed": str(e)}
            log("GATE FAILED: %s" % e)
        save()

    seconds = args.train_seconds
    if args.total_seconds > 0:
        seconds = min(seconds, args.total_seconds - (time.time() - te.T0) - args.eval_reserve)
        log("training budget: %.0f s" % seconds)
    report["training"] = te.train(model, train_ids, args, device, seconds, args.max_steps, history)
    report["history"] = history
    save()
    model.eval()
    ppl = {}
    for g in GENRES:
        seg = [contexts[g]["ids"]]
        ppl[g] = {"fp32": evaluate.perplexity(model.float(), seg, device, torch.float32)}
        if device.type == "cuda":
            ppl[g]["bf16_autocast"] = evaluate.perplexity(model, seg, device, torch.bfloat16)
    log("trained model perplexity: %s" % json.dumps({g: round(p["fp32"]["ppl"], 3) for g, p in ppl.items()}))

    te.export_snapshot(model, cfg, args.out_dir, args.n_shards)
    report["export"] = {"dir_bytes": te.dir_size(args.out_dir)}
    log("exported %s (%.2f MiB)" % (args.out_dir, report["export"]["dir_bytes"] / 2**20))
    fp8 = te.reload_dequantized(args.out_dir, device)
    del model
    routing, traces, mtp, routing_lookahead = {}, {}, {}, {}
    ranks = tuple(args.guess_ranks)
    for g in GENRES:
        seg = [contexts[g]["ids"]]
        ppl[g]["fp8_export_float64"] = evaluate.perplexity(fp8, seg, device, torch.float64)
        mtp[g] = {"agreement": evaluate.mtp_agreement(fp8, seg, device)}
        st, trace = evaluate.routing_stats(fp8, seg, device)
        routing[g] = st
        traces[g] = ascending_rows(trace)
        write_jsonl_gz(os.path.join(args.report_dir, "trace_%s.jsonl.gz" % g), traces[g])
        guesses, groutes = lookahead_guesses(fp8, contexts[g]["ids"], ranks)
        same = sum(sorted(groutes[li][r].tolist()) == traces[g][r][str(li)]
                   for li in groutes for r in range(len(traces[g])))
        routing_lookahead[g] = {"routes_equal_trace": same / (len(groutes) * len(traces[g])),
                                "topk_recall": guess_recall(guesses, traces[g], cfg["num_experts_per_tok"])}
        save_guesses(os.path.join(args.report_dir, "guesses_%s.npz" % g), guesses)
        main_rows, ext_rows, mstats, mguess = mtp_on_trace(fp8, contexts[g]["ids"], args.prompt_tokens,
                                                           ranks if g in args.mtp_guess_genres else ())
        if mguess is not None:
            save_guesses(os.path.join(args.report_dir, "guesses_%s_mtp_on.npz" % g), mguess)
        mtp[g]["mtp_on_trace"] = mstats
        write_jsonl_gz(os.path.join(args.report_dir, "trace_%s_mtp_on.jsonl.gz" % g), main_rows)
        write_jsonl_gz(os.path.join(args.report_dir, "trace_%s_mtp_on_with_mtp_layer.jsonl.gz" % g), ext_rows)
        log("%s: ppl %.3f (fp8 %.3f), mtp %s, recall %s" % (
            g, ppl[g]["fp32"]["ppl"], ppl[g]["fp8_export_float64"]["ppl"], json.dumps(mstats),
            [round(s["next_layer_router_recall"], 3) for s in st.values()]))
        log("%s lookahead: routes equal %.4f, top-k recall depth 1 %.3f, depth 2 %.3f" % (
            g, routing_lookahead[g]["routes_equal_trace"],
            *[np.mean(list(routing_lookahead[g]["topk_recall"]["depth%d" % d].values())) for d in (1, 2)]))
        report.update(perplexity=ppl, routing=routing, mtp=mtp, lookahead=routing_lookahead)
        save()
    if args.dsspec:
        report["dsspec_check"] = dsspec_check(args, contexts, traces, tmp)
        save()
    for f in ("config.json", "tokenizer.json", "model.safetensors.index.json"):
        p = os.path.join(args.out_dir, f)
        if os.path.exists(p):
            with open(p, "rb") as src, open(os.path.join(args.report_dir, f), "wb") as dst:
                dst.write(src.read())
    log("done")


if __name__ == "__main__":
    main()
