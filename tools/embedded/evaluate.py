"""Held-out measurements of a TinyDeepseek: perplexity, MTP agreement, routing statistics, trace.

Perplexity convention (the one dsspec must reproduce on tools/embedded/heldout_ids.json): each
segment is run from position 0 on its own; every position t >= 1 of a segment is scored by
-log p(ids[t] | ids[:t]); perplexity = exp(mean over all scored positions of all segments).
"""
import json
import math

import torch
import torch.nn.functional as F

from tiny_model import MoE


@torch.no_grad()
def perplexity(model, segments, device, dtype):
    nll, n = 0.0, 0
    for seg in segments:
        ids = torch.tensor([seg], device=device)
        with autocast_if(device, dtype):
            logits, _, _ = model(ids, with_mtp=False)
        lp = F.log_softmax(logits[0, :-1].double(), dim=-1)
        nll -= lp.gather(1, ids[0, 1:, None]).sum().item()
        n += ids.shape[1] - 1
    return {"nll": nll / n, "ppl": math.exp(nll / n), "tokens": n}


def autocast_if(device, dtype):
    enabled = dtype == torch.bfloat16 and str(device).startswith("cuda")
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=enabled) if enabled else _null()


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


@torch.no_grad()
def mtp_agreement(model, segments, device):
    """Row i of the MTP (h_i, x_{i+1}) drafts x_{i+2}; the main model's greedy choice for x_{i+2}
    is argmax of its logits at row i+1. Counted over rows 0..T-3 of each segment."""
    agree = correct = main_correct = n = 0
    for seg in segments:
        ids = torch.tensor([seg], device=device)
        logits, mtp_logits, _ = model(ids)
        draft = mtp_logits[0, :-1].argmax(-1)          # rows 0..T-3 -> drafts of x_2..x_{T-1}
        main_next = logits[0, 1:-1].argmax(-1)         # rows 1..T-2 -> greedy x_2..x_{T-1}
        truth = ids[0, 2:]
        agree += (draft == main_next).sum().item()
        correct += (draft == truth).sum().item()
        main_correct += (main_next == truth).sum().item()
        n += truth.numel()
    return {"mtp_matches_main_greedy": agree / n, "mtp_top1_accuracy": correct / n,
            "main_top1_accuracy": main_correct / n, "positions": n}


@torch.no_grad()
def routed_forward(model, ids):
    """Main-model forward that returns, per MoE layer index, (input hidden of that decoder layer,
    chosen expert ids [T, k])."""
    T = ids.shape[1]
    cos, sin = model.rope_tables(T, ids.device)
    x = model.embed_tokens(ids)
    out = {}
    for i, layer in enumerate(model.layers):
        x_in = x
        x = layer(x, cos, sin)
        if isinstance(layer.mlp, MoE):
            out[i] = (x_in[0], layer.mlp.last_ids.clone())
    return out


@torch.no_grad()
def routing_stats(model, segments, device):
    """Per MoE layer: expert load histogram, mean fraction of a token's experts the previous token
    also used, and the top-k recall of predicting layer l's experts by applying layer l's router
    (after its post_attention_layernorm) to the hidden state that ENTERS layer l (= layer l-1's
    output, what a prefetcher has one layer early), skipping layer l's attention."""
    E = model.cfg["n_routed_experts"]
    k = model.cfg["num_experts_per_tok"]
    acc = {}
    trace = []
    for seg in segments:
        ids = torch.tensor([seg], device=device)
        routes = routed_forward(model, ids)
        T = ids.shape[1]
        rows = [dict() for _ in range(T)]
        for li, (x_in, chosen) in routes.items():
            a = acc.setdefault(li, {"load": torch.zeros(E, dtype=torch.long), "reuse": 0, "pairs": 0,
                                    "recall": 0, "tokens": 0})
            a["load"] += torch.bincount(chosen.reshape(-1).cpu(), minlength=E)
            same = (chosen[1:, :, None] == chosen[:-1, None, :]).any(-1).sum().item()
            a["reuse"] += same
            a["pairs"] += (T - 1) * k
            layer = model.layers[li]
            pred_ids, _ = layer.mlp.gate(layer.post_attention_layernorm(x_in))
            a["recall"] += (pred_ids[:, :, None] == chosen[:, None, :]).any(-1).sum().item()
            a["tokens"] += T
            for t, experts in enumerate(chosen.cpu().tolist()):
                rows[t][str(li)] = experts
        trace.extend(rows)
    stats = {}
    for li, a in sorted(acc.items()):
        load = a["load"].float()
        stats[str(li)] = {
            "load_histogram": a["load"].tolist(),
            "load_max_over_mean": (load.max() / load.mean()).item(),
            "load_min_over_mean": (load.min() / load.mean()).item(),
            "experts_never_used": int((a["load"] == 0).sum()),
            "prev_token_reuse": a["reuse"] / a["pairs"],
            "next_layer_router_recall": a["recall"] / (a["tokens"] * k),
        }
    return stats, trace


def write_trace(path, trace):
    with open(path, "w") as fh:
        for row in trace:
            fh.write(json.dumps(row, separators=(",", ":")) + "\n")


@torch.no_grad()
def generate(model, prompt_ids, n_new, device, temperature=0.0, top_p=1.0, seed=0, eos_id=1):
    """Plain recompute-everything decoding (the model is tiny); temperature 0 = greedy."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = list(prompt_ids)
    for _ in range(n_new):
        logits, _, _ = model(torch.tensor([ids], device=device), with_mtp=False)
        last = logits[0, -1].double().cpu()
        if temperature <= 0:
            nxt = int(last.argmax())
        else:
            p = torch.softmax(last / temperature, -1)
            sp, si = p.sort(descending=True)
            keep = (sp.cumsum(0) - sp) < top_p
            sp = sp * keep
            nxt = int(si[torch.multinomial(sp / sp.sum(), 1, generator=g)])
        ids.append(nxt)
        if nxt == eos_id:
            break
    return ids[len(prompt_ids):]
