"""The trainable DeepSeek-V3 architecture used for models/dsspec-tiny.

Plain torch modules that compute exactly what transformers' DeepseekV3ForCausalLM computes
(the noaux_tc router and the MTP layer included), written so that they also run on the CPU-only torch 1.13 of the
development machine (no scaled_dot_product_attention there, no float8 dtype).

Traps this module takes care of:
  - rope dims are interleaved pairs (2i, 2i+1) as in DeepSeek's checkpoints; transformers
    de-interleaves them, which permutes q_rot and k_rot identically: same dot products;
  - YaRN inverse frequencies and the softmax mscale^2 follow transformers' yarn code, with
    max_position_embeddings = factor * original_max_position_embeddings so that the factor
    transformers recomputes from those two equals rope_scaling.factor;
  - noaux_tc routing: the correction bias only chooses experts, the weights are the unbiased
    sigmoid scores; transformers masks dropped groups with 0.0 where DeepSeek uses -inf, which
    agree only while every biased choice score is positive, so the bias is kept >= 0 (a common
    shift of the bias changes no routing decision);
  - the MoE is computed densely (every expert on every token, weight 0 for unselected ones):
    exactly the sparse result, and two large GEMMs are far faster on a GPU than 64 tiny ones.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def yarn_get_mscale(scale, mscale):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn_inv_freq(cfg):
    """Inverse frequencies of the rope dims (transformers' _compute_yarn_parameters)."""
    dim = cfg["qk_rope_head_dim"]
    base = cfg["rope_theta"]
    rs = cfg["rope_scaling"]
    factor = rs["factor"]
    orig = rs["original_max_position_embeddings"]
    assert cfg["max_position_embeddings"] == factor * orig, "max_position_embeddings must be factor * original"

    def correction_dim(rotations):
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(rs["beta_fast"])), 0)
    high = min(math.ceil(correction_dim(rs["beta_slow"])), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # 1 = high-frequency dim, keeps its original frequency
    return interpolation * (1 - keep) + extrapolation * keep


def rope_attention_factor(cfg):
    rs = cfg["rope_scaling"]
    return yarn_get_mscale(rs["factor"], rs["mscale"]) / yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])


def softmax_scale(cfg):
    rs = cfg["rope_scaling"]
    m = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
    return (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5 * m * m


def apply_rope_interleaved(x, cos, sin):
    """x [..., T, d] with pairs (2i, 2i+1); cos/sin [T, d/2] (float64). Rotation in float32, or
    float64 for a float64 model (the reference evaluations)."""
    dtype = x.dtype
    work = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = cos.to(work), sin.to(work)
    xf = x.to(work).unflatten(-1, (-1, 2))
    x0, x1 = xf[..., 0], xf[..., 1]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return out.flatten(-2).to(dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dtype)


def linear(in_f, out_f):
    return nn.Linear(in_f, out_f, bias=False)


class MLAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        self.nh = nh
        self.nope, self.rope, self.vdim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.kv_rank = cfg["kv_lora_rank"]
        eps = cfg["rms_norm_eps"]
        self.q_a_proj = linear(H, cfg["q_lora_rank"])
        self.q_a_layernorm = RMSNorm(cfg["q_lora_rank"], eps)
        self.q_b_proj = linear(cfg["q_lora_rank"], nh * (self.nope + self.rope))
        self.kv_a_proj_with_mqa = linear(H, self.kv_rank + self.rope)
        self.kv_a_layernorm = RMSNorm(self.kv_rank, eps)
        self.kv_b_proj = linear(self.kv_rank, nh * (self.nope + self.vdim))
        self.o_proj = linear(nh * self.vdim, H)
        self.scale = softmax_scale(cfg)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(B, T, self.nh, -1).transpose(1, 2)
        q_nope, q_rot = q.split([self.nope, self.rope], dim=-1)
        ckv = self.kv_a_proj_with_mqa(x)
        latent, k_rot = ckv.split([self.kv_rank, self.rope], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(B, T, self.nh, -1).transpose(1, 2)
        k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
        q_rot = apply_rope_interleaved(q_rot, cos, sin)
        k_rot = apply_rope_interleaved(k_rot.unsqueeze(1), cos, sin).expand(B, self.nh, T, self.rope)
        q = torch.cat((q_nope, q_rot), dim=-1)
        k = torch.cat((k_nope, k_rot), dim=-1)
        out = causal_attention(q, k, v, self.scale)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))


def causal_attention(q, k, v, scale):
    if hasattr(F, "scaled_dot_product_attention") and q.is_cuda:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    T = q.shape[-2]
    att = torch.matmul(q, k.transpose(-1, -2)).float() * scale
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    att = att.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype)
    return torch.matmul(att, v)


class DenseMLP(nn.Module):
    def __init__(self, H, inter):
        super().__init__()
        self.gate_proj = linear(H, inter)
        self.up_proj = linear(H, inter)
        self.down_proj = linear(inter, H)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class NoauxRouter(nn.Module):
    """Sigmoid scores, group-limited top-k chosen with the correction bias (spec 4, router)."""

    def __init__(self, cfg):
        super().__init__()
        self.E, self.k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
        self.n_group, self.topk_group = cfg["n_group"], cfg["topk_group"]
        self.scaling = cfg["routed_scaling_factor"]
        self.weight = nn.Parameter(torch.empty(self.E, cfg["hidden_size"]))
        self.register_buffer("e_score_correction_bias", torch.zeros(self.E))

    def select(self, scores):
        """scores [N, E] fp32 -> chosen expert ids [N, k] (no gradient)."""
        with torch.no_grad():
            choice = scores + self.e_score_correction_bias
            grouped = choice.view(-1, self.n_group, self.E // self.n_group)
            group_score = grouped.topk(2, dim=-1).values.sum(-1)
            keep = group_score.topk(self.topk_group, dim=-1).indices
            group_mask = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, keep, True)
            expert_mask = group_mask.unsqueeze(-1).expand_as(grouped).reshape(-1, self.E)
            return choice.masked_fill(~expert_mask, float("-inf")).topk(self.k, dim=-1).indices

    def forward(self, x):
        """x [N, H] -> (ids [N, k], weights [N, k] fp32 with gradient to the router)."""
        if x.is_cuda:  # the router stays in fp32 under bf16 autocast (spec: router in fp32)
            with torch.autocast("cuda", enabled=False):
                return self._route(x)
        return self._route(x)

    def _route(self, x):
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        scores = torch.sigmoid(F.linear(x.to(work), self.weight.to(work)))
        ids = self.select(scores)
        w = scores.gather(1, ids)
        w = w / (w.sum(-1, keepdim=True) + 1e-20) * self.scaling
        return ids, w


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, I, E = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["n_routed_experts"]
        self.E, self.I = E, I
        self.gate = NoauxRouter(cfg)
        # experts' weights as [E, out, in], the layout of the per-expert nn.Linear weights
        self.experts_gate = nn.Parameter(torch.empty(E, I, H))
        self.experts_up = nn.Parameter(torch.empty(E, I, H))
        self.experts_down = nn.Parameter(torch.empty(E, H, I))
        self.shared_experts = DenseMLP(H, I * cfg["n_shared_experts"])
        self.last_ids = None  # routing of the last forward, for load balancing and traces

    def forward(self, x):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        ids, w = self.gate(flat)
        self.last_ids = ids
        dense_w = torch.zeros(flat.shape[0], self.E, dtype=w.dtype, device=w.device).scatter(1, ids, w)
        H = shape[-1]
        g = flat @ self.experts_gate.reshape(self.E * self.I, H).t().to(flat.dtype)
        u = flat @ self.experts_up.reshape(self.E * self.I, H).t().to(flat.dtype)
        a = (F.silu(g) * u).view(-1, self.E, self.I) * dense_w.unsqueeze(-1).to(g.dtype)
        down = self.experts_down.permute(0, 2, 1).reshape(self.E * self.I, H).to(flat.dtype)
        routed = a.reshape(-1, self.E * self.I) @ down
        return routed.view(shape) + self.shared_experts(x)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, moe):
        super().__init__()
        eps = cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.self_attn = MLAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.mlp = MoE(cfg) if moe else DenseMLP(cfg["hidden_size"], cfg["intermediate_size"])

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class MTPLayer(nn.Module):
    """Layer num_hidden_layers: u = eh_proj([enorm(emb(x_{i+1})) ; hnorm(h_i)]), embedding FIRST."""

    def __init__(self, cfg):
        super().__init__()
        H, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.enorm = RMSNorm(H, eps)
        self.hnorm = RMSNorm(H, eps)
        self.eh_proj = linear(2 * H, H)
        self.block = DecoderLayer(cfg, moe=True)
        self.shared_head_norm = RMSNorm(H, eps)

    def forward(self, emb_next, h_main, cos, sin):
        u = self.eh_proj(torch.cat((self.enorm(emb_next), self.hnorm(h_main)), dim=-1))
        return self.shared_head_norm(self.block(u, cos, sin))


class TinyDeepseek(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        V, H = cfg["vocab_size"], cfg["hidden_size"]
        self.embed_tokens = nn.Embedding(V, H)
        self.layers = nn.ModuleList(
            [DecoderLayer(cfg, moe=i >= cfg["first_k_dense_replace"]) for i in range(cfg["num_hidden_layers"])]
        )
        self.norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.lm_head = linear(H, V)
        self.mtp = MTPLayer(cfg)
        self.register_buffer("inv_freq", yarn_inv_freq(cfg), persistent=False)
        self.attention_factor = rope_attention_factor(cfg)
        self.reset_parameters(cfg.get("initializer_range", 0.02))

    def reset_parameters(self, std):
        for name, p in self.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name or name.endswith("enorm.weight") \
                    or name.endswith("hnorm.weight"):
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, std=std)

    def rope_tables(self, T, device):
        """cos/sin [T, d/2] in float64 (cheap: d/2 = 16 columns)."""
        pos = torch.arange(T, device=device, dtype=torch.float64)
        freqs = torch.outer(pos, self.inv_freq.to(device=device, dtype=torch.float64))
        return freqs.cos() * self.attention_factor, freqs.sin() * self.attention_factor

    def moe_layers(self):
        """MoE modules in layer order, the MTP layer's last."""
        mods = [l.mlp for l in self.layers if isinstance(l.mlp, MoE)]
        return mods + [self.mtp.block.mlp]

    def forward(self, ids, with_mtp=True):
        """ids [B, T] -> (main logits [B, T, V], mtp logits [B, T-1, V] or None, post-norm hidden)."""
        B, T = ids.shape
        cos, sin = self.rope_tables(T, ids.device)
        emb = self.embed_tokens(ids)
        x = emb
        for layer in self.layers:
            x = layer(x, cos, sin)
        h = self.norm(x)
        logits = self.lm_head(h)
        mtp_logits = None
        if with_mtp:
            # row i pairs h_i with the embedding of x_{i+1}, at rotary position i
            m = self.mtp(emb[:, 1:], h[:, :-1], cos[: T - 1], sin[: T - 1])
            mtp_logits = self.lm_head(m)
        return logits, mtp_logits, h


def balance_update(model, speed):
    """Aux-loss-free balancing (DeepSeek-V3): after each step, raise the bias of experts that got
    fewer than the mean number of tokens and lower the others', by `speed`; then shift every
    bias of the layer so the smallest is 0 (routing unchanged, choice scores stay positive)."""
    with torch.no_grad():
        for moe in model.moe_layers():
            if moe.last_ids is None:
                continue
            load = torch.bincount(moe.last_ids.reshape(-1), minlength=moe.E).float()
            bias = moe.gate.e_score_correction_bias
            bias += speed * torch.sign(load.mean() - load)
            bias -= bias.min()
            moe.last_ids = None
