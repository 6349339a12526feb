"""TinyDeepseek <-> R1 tensor names. The snapshot itself is written and read by tools/r1_format.py."""
import numpy as np
import torch

from tiny_model import MoE


def _mlp_names(prefix, mlp, out):
    out[prefix + "gate_proj.weight"] = mlp.gate_proj.weight
    out[prefix + "up_proj.weight"] = mlp.up_proj.weight
    out[prefix + "down_proj.weight"] = mlp.down_proj.weight


def _moe_names(prefix, moe, out):
    out[prefix + "gate.weight"] = moe.gate.weight
    out[prefix + "gate.e_score_correction_bias"] = moe.gate.e_score_correction_bias
    _mlp_names(prefix + "shared_experts.", moe.shared_experts, out)
    for e in range(moe.E):
        p = prefix + "experts.%d." % e
        out[p + "gate_proj.weight"] = moe.experts_gate[e]
        out[p + "up_proj.weight"] = moe.experts_up[e]
        out[p + "down_proj.weight"] = moe.experts_down[e]


def _block_names(prefix, layer, out):
    out[prefix + "input_layernorm.weight"] = layer.input_layernorm.weight
    a = layer.self_attn
    for n in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"):
        out[prefix + "self_attn.%s.weight" % n] = getattr(a, n).weight
    out[prefix + "self_attn.q_a_layernorm.weight"] = a.q_a_layernorm.weight
    out[prefix + "self_attn.kv_a_layernorm.weight"] = a.kv_a_layernorm.weight
    out[prefix + "post_attention_layernorm.weight"] = layer.post_attention_layernorm.weight
    if isinstance(layer.mlp, MoE):
        _moe_names(prefix + "mlp.", layer.mlp, out)
    else:
        _mlp_names(prefix + "mlp.", layer.mlp, out)


def r1_tensor_map(model):
    """R1 name -> tensor of the model (views, not copies). The MTP layer's embed_tokens and
    shared_head.head are the main model's (DeepSeek-V3 shares them; R1 stores copies)."""
    out = {"model.embed_tokens.weight": model.embed_tokens.weight}
    for i, layer in enumerate(model.layers):
        _block_names("model.layers.%d." % i, layer, out)
    out["model.norm.weight"] = model.norm.weight
    out["lm_head.weight"] = model.lm_head.weight
    p = "model.layers.%d." % model.cfg["num_hidden_layers"]
    mtp = model.mtp
    out[p + "embed_tokens.weight"] = model.embed_tokens.weight
    out[p + "enorm.weight"] = mtp.enorm.weight
    out[p + "hnorm.weight"] = mtp.hnorm.weight
    out[p + "eh_proj.weight"] = mtp.eh_proj.weight
    _block_names(p, mtp.block, out)
    out[p + "shared_head.norm.weight"] = mtp.shared_head_norm.weight
    out[p + "shared_head.head.weight"] = model.lm_head.weight
    return out


def export_weights(model):
    """R1 name -> float32 numpy array, ready for r1_format.write_snapshot."""
    return {k: v.detach().float().cpu().numpy() for k, v in r1_tensor_map(model).items()}


def load_weights(model, weights):
    """Load R1-named float arrays (e.g. r1_format.read_snapshot's dequantized ones) into the model.
    The MTP copies of embed_tokens / shared_head.head must equal the main ones (they are one
    parameter here)."""
    targets = r1_tensor_map(model)
    missing = set(targets) - set(weights)
    if missing:
        raise KeyError("snapshot lacks %s" % sorted(missing)[:5])
    p = "model.layers.%d." % model.cfg["num_hidden_layers"]
    for copy, main in ((p + "embed_tokens.weight", "model.embed_tokens.weight"),
                       (p + "shared_head.head.weight", "lm_head.weight")):
        if not np.array_equal(np.asarray(weights[copy]), np.asarray(weights[main])):
            raise ValueError("%s differs from %s: this model shares them" % (copy, main))
    with torch.no_grad():
        for name, t in targets.items():
            t.copy_(torch.as_tensor(np.asarray(weights[name])).to(t.dtype))
