#!/usr/bin/env python3
"""Train dsspec's embedded default model (models/dsspec-tiny) and measure it.

A small DeepseekV3ForCausalLM (MLA + YaRN, dense then noaux_tc MoE layers, shared expert, one MTP
layer) trained on Python sources, with its own DeepSeek-style byte-level BPE tokenizer, exported in
R1's exact FP8 layout by tools/r1_format.py. See tools/embedded/README.md for what was run and the
numbers it gave.

Stages: corpus -> tokenizer -> token ids (+ held-out split) -> [consistency gate against
transformers] -> time-limited training -> FP8 export -> reload and evaluate -> reports.
Everything except the tokenizer training and the transformers checks runs with the CPU-only
torch 1.13 + numpy of the development machine (--preset dry --allow-byte-tokenizer).
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "embedded"))
sys.path.insert(0, HERE)

import corpus  # noqa: E402
import evaluate  # noqa: E402
import export  # noqa: E402
import r1_format  # noqa: E402
import tokenizer_build  # noqa: E402
from tiny_model import TinyDeepseek, balance_update  # noqa: E402

# Model dimensions. "full" is what ships; "dry" exercises every stage in seconds on a CPU.
PRESETS = {
    "full": dict(vocab_size=4096, hidden_size=256, intermediate_size=768, moe_intermediate_size=96,
                 num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=4, q_lora_rank=128,
                 kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64,
                 n_routed_experts=64, num_experts_per_tok=6, n_group=8, topk_group=4,
                 routed_scaling_factor=2.5, rope_factor=40, original_max_position_embeddings=4096),
    "dry": dict(vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                num_hidden_layers=3, first_k_dense_replace=1, num_attention_heads=2, q_lora_rank=32,
                kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16,
                n_routed_experts=64, num_experts_per_tok=6, n_group=8, topk_group=4,
                routed_scaling_factor=2.5, rope_factor=40, original_max_position_embeddings=4096),
}
DEFAULT_ROOTS = ["/opt/torch/.venv/lib/python3.12/site-packages"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full")
    ap.add_argument("--roots", nargs="+", default=DEFAULT_ROOTS, help="directories of .py training text")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "models", "dsspec-tiny"))
    ap.add_argument("--report-dir", default=os.path.join(HERE, "embedded"))
    ap.add_argument("--max-train-mb", type=float, default=200)
    ap.add_argument("--max-heldout-mb", type=float, default=2)
    ap.add_argument("--tokenizer-sample-mb", type=float, default=40)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--train-seconds", type=float, default=270, help="wall-clock training budget")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = time only)")
    ap.add_argument("--total-seconds", type=float, default=0,
                    help="wall-clock budget of the whole script: training is cut so that --eval-reserve "
                         "seconds remain for export and evaluation (0 = no limit)")
    ap.add_argument("--eval-reserve", type=float, default=110)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup-steps", type=int, default=150)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-speed", type=float, default=1e-3, help="aux-loss-free balancing update speed")
    ap.add_argument("--heldout-segments", type=int, default=8)
    ap.add_argument("--gate-steps", type=int, default=20,
                    help="steps before the transformers consistency gate (0 = no gate)")
    ap.add_argument("--n-shards", type=int, default=4)
    ap.add_argument("--allow-byte-tokenizer", action="store_true",
                    help="dry run without the tokenizers library: bytes as ids (never shipped)")
    ap.add_argument("--skip-transformers", action="store_true", help="no transformers checks (dry run)")
    ap.add_argument("--seed", type=int, default=1234)
    return ap.parse_args()


def log(msg):
    print("[%7.1fs] %s" % (time.time() - T0, msg), flush=True)


# ---------------------------------------------------------------------------------------------
# data

def build_tokenizer(args, train_docs, chat_docs, vocab_size):
    tok_path = os.path.join(args.out_dir, "tokenizer.json")
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        if not args.allow_byte_tokenizer:
            raise SystemExit("tokenizers library missing: the shipped model needs it "
                             "(use --allow-byte-tokenizer only for a dry run)")
        log("tokenizers missing: byte tokenizer (dry run)")
        return tokenizer_build.ByteTokenizer()
    budget = args.tokenizer_sample_mb * 1e6

    def sample():
        used = 0
        for i, (_, text) in enumerate(train_docs):
            if used > budget:
                break
            used += len(text)
            yield text
            if i % 8 == 0 and i // 8 < len(chat_docs):
                yield chat_docs[i // 8]

    tok = tokenizer_build.train_bpe(sample(), vocab_size, tok_path)
    log("tokenizer: %d ids (BPE %d + added), written to %s" % (
        tok.get_vocab_size(True), len(json.load(open(tok_path))["model"]["vocab"]), tok_path))
    return tokenizer_build.HFTokenizer(tok)


def pack(tok, texts, batch=2000):
    """[BOS] text [EOS] per document, concatenated -> int32 array."""
    parts = []
    for i in range(0, len(texts), batch):
        for ids in tok.encode_batch(texts[i:i + batch]):
            parts.append(np.array([0] + ids + [1], dtype=np.int32))
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def prepare_data(args, vocab_size):
    roots = [r for r in args.roots if os.path.isdir(r)]
    if not roots:
        raise SystemExit("--roots: none of %s is a directory" % args.roots)
    train_docs, held_docs, stats = corpus.collect(roots, args.max_train_mb * 1e6, args.max_heldout_mb * 1e6)
    log("corpus: %s" % json.dumps(stats))
    chat_docs = corpus.chat_documents(train_docs, workers=min(16, os.cpu_count() or 1))
    log("chat-format documents from docstrings: %d" % len(chat_docs))
    tok = build_tokenizer(args, train_docs, chat_docs, vocab_size)
    rng = np.random.default_rng(args.seed)
    texts = [t for _, t in train_docs] + chat_docs
    order = rng.permutation(len(texts))
    train_ids = pack(tok, [texts[i] for i in order])
    need = args.heldout_segments * args.seq_len
    held_ids, used = np.zeros(0, np.int32), 0
    while len(held_ids) < need and used < len(held_docs):
        held_ids = np.concatenate([held_ids, pack(tok, [held_docs[used][1]])])
        used += 1
    if len(held_ids) < need:
        raise SystemExit("held-out text gives %d tokens, %d needed" % (len(held_ids), need))
    held_docs = held_docs[:used]  # the files the saved segments come from
    segments = held_ids[:need].reshape(args.heldout_segments, args.seq_len).tolist()
    stats.update(roots=roots, chat_documents=len(chat_docs), train_tokens=int(len(train_ids)),
                 heldout_files_used=used, heldout_tokens_saved=int(need),
                 bytes_per_token=stats["train_bytes"] / max(1, len(train_ids) - 2 * len(texts)))
    log("tokens: train %d, held-out %d from %d files (%.2f bytes/token)" % (
        len(train_ids), need, used, stats["bytes_per_token"]))
    return tok, train_ids, segments, held_docs, stats


def save_heldout(args, segments, held_docs):
    obj = {"tokenizer": "models/dsspec-tiny/tokenizer.json", "seq_len": args.seq_len,
           "convention": evaluate.__doc__.strip().split("\n\n")[1],
           "files": [rel for rel, _ in held_docs],
           "segments": [[int(x) for x in s] for s in segments]}
    with open(os.path.join(args.report_dir, "heldout_ids.json"), "w") as fh:
        json.dump(obj, fh, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# training

def make_config(args):
    return r1_format.deepseek_config(**PRESETS[args.preset])


def batches(train_ids, args, device, gen):
    data = torch.from_numpy(train_ids.astype(np.int64)).to(device)
    n = len(data) - args.seq_len - 1
    ar = torch.arange(args.seq_len, device=device)
    while True:
        off = torch.randint(0, n, (args.batch,), generator=gen).to(device)
        yield data[off[:, None] + ar]


def losses(model, ids, args):
    logits, mtp_logits, _ = model(ids)
    V = logits.shape[-1]
    main = F.cross_entropy(logits[:, :-1].reshape(-1, V).float(), ids[:, 1:].reshape(-1))
    mtp = F.cross_entropy(mtp_logits[:, :-1].reshape(-1, V).float(), ids[:, 2:].reshape(-1))
    return main, mtp


def make_optimizer(model, lr):
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    kw = {"fused": True} if torch.cuda.is_available() else {}
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, **kw)


def lr_at(args, step, frac):
    warm = min(1.0, (step + 1) / args.warmup_steps)
    return args.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def train(model, train_ids, args, device, seconds, max_steps, history):
    if seconds <= 0 and not max_steps:
        return {"steps": 0, "tokens": 0, "seconds": 0.0}
    opt = make_optimizer(model, args.lr)
    gen = torch.Generator().manual_seed(args.seed)
    it = batches(train_ids, args, device, gen)
    amp = device.type == "cuda"
    start = time.time()
    step = 0
    tokens = 0
    while True:
        frac = (time.time() - start) / seconds if seconds > 0 else step / max(1, max_steps)
        if frac >= 1.0 or (max_steps and step >= max_steps):
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(args, step, frac)
        ids = next(it)
        with evaluate.autocast_if(device, torch.bfloat16 if amp else torch.float32):
            main, mtp = losses(model, ids, args)
            loss = main + args.mtp_weight * mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        balance_update(model, args.bias_speed)
        step += 1
        tokens += ids.numel()
        if step % 50 == 0 or step == 1:
            el = time.time() - start
            rec = {"step": step, "seconds": round(el, 1), "loss": round(main.item(), 4),
                   "mtp_loss": round(mtp.item(), 4), "lr": opt.param_groups[0]["lr"],
                   "tokens": tokens, "tokens_per_s": round(tokens / max(el, 1e-9))}
            history.append(rec)
            log("step %d loss %.4f mtp %.4f lr %.2e %.0f tok/s" % (
                step, rec["loss"], rec["mtp_loss"], rec["lr"], rec["tokens_per_s"]))
    return {"steps": step, "tokens": tokens, "seconds": time.time() - start}


# ---------------------------------------------------------------------------------------------
# export and checks

def export_snapshot(model, cfg, out_dir, n_shards):
    weights = export.export_weights(model)
    straddle = r1_format.write_snapshot(out_dir, cfg, weights, n_shards=n_shards)
    if not straddle:
        raise SystemExit("export: no routed expert straddles two shards")
    return straddle


def reload_dequantized(out_dir, device, dtype=torch.float64):
    cfg, weights = r1_format.read_snapshot(out_dir)
    model = TinyDeepseek(cfg).to(dtype)
    export.load_weights(model, weights)
    return model.to(device).eval()


def transformers_check(snap_dir, mine, segments, device):
    """transformers' DeepseekV3ForCausalLM (built by r1_format from the dequantized snapshot, float64,
    on the CPU) against our own modules on the same weights: max |logit difference| for the main
    model and for the MTP layer (r1_format.MTPReference), and transformers' held-out perplexity."""
    cfg, w = r1_format.read_snapshot(snap_dir)
    hf, info = r1_format.build_transformers_model(cfg, w)
    mtp_ref = r1_format.MTPReference(cfg, w, hf)
    out = {"max_abs_logit_diff": 0.0, "max_abs_mtp_logit_diff": 0.0, "hf_info": info}
    nll = 0.0
    n = 0
    with torch.no_grad():
        for k, seg in enumerate(segments):
            ids = torch.tensor([seg])
            base = hf.model(input_ids=ids)
            h = base.last_hidden_state
            ref = hf.lm_head(h)
            own, own_mtp, _ = mine(ids.to(device))
            out["max_abs_logit_diff"] = max(out["max_abs_logit_diff"], (ref - own.cpu()).abs().max().item())
            if k < 2:  # the MTP reference is slow-ish (eager experts); two segments suffice
                ref_mtp = mtp_ref.forward(h[0, :-1], seg[1:])
                out["max_abs_mtp_logit_diff"] = max(out["max_abs_mtp_logit_diff"],
                                                    (ref_mtp - own_mtp[0].cpu()).abs().max().item())
            lp = torch.log_softmax(ref[0, :-1].double(), -1)
            nll -= lp.gather(1, ids[0, 1:, None]).sum().item()
            n += ids.shape[1] - 1
    out.update(nll=nll / n, ppl=math.exp(nll / n), tokens=n)
    return out, hf


def consistency_gate(model, cfg, segments, device, tmp):
    snap = os.path.join(tmp, "gate")
    export_snapshot(model, cfg, snap, 4)
    mine = reload_dequantized(snap, device)
    try:
        res, _ = transformers_check(snap, mine, segments[:2], device)
    except Exception as e:  # noqa: BLE001 (an oracle that cannot run must not cost the training)
        log("consistency gate could not run: %r" % e)
        return {"error": repr(e)}
    log("consistency gate: %s" % json.dumps(res, default=str))
    # float64 on both sides: a semantic mismatch (rope, mask, routing) gives differences >> 1e-2
    bad = not (res["max_abs_logit_diff"] < 1e-4 and res["max_abs_mtp_logit_diff"] < 1e-4)
    if bad:
        raise SystemExit("consistency gate FAILED: our modules and transformers disagree")
    return res


# ---------------------------------------------------------------------------------------------

def samples(model, tok, device, hf=None):
    prompts = [
        ("code", "import numpy as np\n\n\ndef "),
        ("docstring", 'def read_config(path):\n    """'),
        ("chat", "<｜User｜>Write a Python function `is_prime(n)`: Return True if n is a prime number."
                 "<｜Assistant｜><think>\n"),
    ]
    out = []
    for name, text in prompts:
        ids = [0] + tok.encode_batch([text])[0]
        for label, temp in (("greedy", 0.0), ("sampled T=0.6 top_p=0.95", 0.6)):
            if hf is not None:
                gen = hf_generate(hf, ids, device, temp)
                engine = "transformers"
            else:
                gen = evaluate.generate(model, ids, 80, device, temperature=temp, top_p=0.95)
                engine = "tiny_model"
            out.append({"prompt": text, "mode": label, "engine": engine, "output": tok.decode(gen)})
    return out


def hf_generate(hf, ids, device, temp):
    torch.manual_seed(0)
    inp = torch.tensor([ids])  # the transformers oracle lives on the CPU
    kw = dict(max_new_tokens=80, eos_token_id=1, pad_token_id=1)
    if temp > 0:
        kw.update(do_sample=True, temperature=temp, top_p=0.95, top_k=0)
    else:
        kw.update(do_sample=False)
    out = hf.generate(inp, **kw)
    return out[0, len(ids):].tolist()


def save_report(args, report):
    with open(os.path.join(args.report_dir, "report.json"), "w") as fh:
        json.dump(report, fh, indent=1, ensure_ascii=False, default=str)


def dir_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


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
    cfg = make_config(args)
    report = {"preset": args.preset, "args": vars(args), "device": str(device), "torch": torch.__version__}

    tok, train_ids, segments, held_docs, data_stats = prepare_data(args, cfg["vocab_size"])
    report["data"] = data_stats
    save_heldout(args, segments, held_docs)
    tokenizer_build.write_configs(args.out_dir, os.path.join(REPO, "tests/tokenizer/data/r1_chat_template.jinja"),
                                  cfg["max_position_embeddings"])

    model = TinyDeepseek(cfg).to(device)
    report["parameters"] = sum(p.numel() for p in model.parameters())
    history = []
    tmp = tempfile.mkdtemp(prefix="dsspec-tiny-")
    if args.gate_steps and not args.skip_transformers:
        train(model, train_ids, args, device, 0, args.gate_steps, history)
        report["consistency_gate"] = consistency_gate(model, cfg, segments, device, tmp)

    seconds = args.train_seconds
    if args.total_seconds > 0:
        seconds = min(seconds, args.total_seconds - (time.time() - T0) - args.eval_reserve)
        log("training budget: %.0f s" % seconds)
    report["training"] = train(model, train_ids, args, device, seconds, args.max_steps, history)
    report["history"] = history
    model.eval()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype == torch.bfloat16:
        report["ppl_trained_bf16_autocast"] = evaluate.perplexity(model, segments, device, dtype)
    report["ppl_trained_fp32"] = evaluate.perplexity(model.float(), segments, device, torch.float32)
    log("trained model: %s" % json.dumps(report["ppl_trained_fp32"]))

    straddle = export_snapshot(model, cfg, args.out_dir, args.n_shards)
    report["export"] = {"straddling_experts": straddle, "dir_bytes": dir_size(args.out_dir)}
    log("exported %s (%.2f MiB), straddling experts %s" % (args.out_dir, dir_size(args.out_dir) / 2**20, straddle))
    save_report(args, report)

    fp8 = reload_dequantized(args.out_dir, device)
    report["ppl_fp8_export_float64_own_modules"] = evaluate.perplexity(fp8, segments, device, torch.float64)
    report["mtp"] = evaluate.mtp_agreement(fp8, segments, device)
    stats, trace = evaluate.routing_stats(fp8, segments, device)
    report["routing"] = stats
    evaluate.write_trace(os.path.join(args.report_dir, "trace_heldout.jsonl"), trace)
    log("fp8 export: %s" % json.dumps(report["ppl_fp8_export_float64_own_modules"]))
    log("mtp: %s" % json.dumps(report["mtp"]))
    for li, s in stats.items():
        log("layer %s: reuse %.3f recall %.3f load max/mean %.2f unused %d" % (
            li, s["prev_token_reuse"], s["next_layer_router_recall"], s["load_max_over_mean"],
            s["experts_never_used"]))
    save_report(args, report)

    hf = None
    if not args.skip_transformers:
        try:
            res, hf = transformers_check(args.out_dir, fp8, segments, device)
            report["ppl_fp8_export_transformers_float64"] = res
            log("transformers on the export: %s" % json.dumps(res, default=str))
            save_report(args, report)
        except Exception as e:  # the model is saved already; report what failed
            report["transformers_error"] = repr(e)
            log("transformers check failed: %r" % e)
    try:
        report["samples"] = samples(fp8, tok, device, hf)
    except Exception as e:
        report["samples_error"] = repr(e)
        report["samples"] = samples(fp8, tok, device, None)
    save_report(args, report)
    shutil.rmtree(tmp, ignore_errors=True)
    log("done")


T0 = time.time()
if __name__ == "__main__":
    main()
