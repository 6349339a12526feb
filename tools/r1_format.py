"""DeepSeek-R1 on-disk format: writer, reader and the transformers oracle.

Pure numpy + stdlib for everything that touches the format (runs with Debian's python3 + numpy);
torch/transformers are imported only inside the oracle functions at the end.

The format, as the released deepseek-ai/DeepSeek-R1 snapshot has it:
  config.json                      original DeepSeek key set (rope_scaling "type": "yarn", ...)
  generation_config.json           bos 0, eos 1, temperature 0.6, top_p 0.95
  model.safetensors.index.json     weight_map name -> shard; metadata.total_size counts FP8 as 2 bytes
                                   (wrong by ~2x, as R1's is: never size anything from it)
  model-00001-of-000005.safetensors ...  (R1 spells the count with six digits: "-of-000163")
Shards are plain safetensors: u64 LE header length N, N bytes of JSON (padded with spaces so that
N % 8 == 0, as the safetensors library does), then the data. Tensors lie in R1's order, each routed
expert's six tensors contiguous (gate W, gate scale, up W, up scale, down W, down scale), and shard
cuts fall between tensors, so an expert can straddle two shards (the writer makes sure one does).

dtypes: F8_E4M3 for every linear weight of the decoder layers (attention, dense MLP, shared and routed
experts) with an F32 weight_scale_inv next to it (128x128 blocks, grid ceil(R/128) x ceil(C/128));
BF16 for embeddings, norms, the router weight (mlp.gate.weight), lm_head and the MTP extras
(eh_proj, enorm, hnorm, shared_head.*); F32 for mlp.gate.e_score_correction_bias.
"""
import json
import math
import os
import re
import struct

import numpy as np

FP8_MAX = 448.0
BLOCK = 128

# ----------------------------------------------------------------------------------------------
# FP8 E4M3 "fn": 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinities, only
# S.1111.111 is NaN, so the largest finite magnitude is 1.75 * 2^8 = 448.


def _fp8_table():
    codes = np.arange(256, dtype=np.uint32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = (codes & 0x7).astype(np.float64)
    mag = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1.0 + man / 8.0) * 2.0 ** (exp.astype(np.float64) - 7))
    vals = sign * mag
    vals[(codes & 0x7F) == 0x7F] = np.nan
    return vals  # float64, exact


FP8_E4M3_VALUES = _fp8_table()
# The 127 finite non-negative values (codes 0x00..0x7E) ascend with the code, which the encoder uses.
_FP8_POS = FP8_E4M3_VALUES[:0x7F]


def fp8_e4m3_decode(codes):
    """uint8 codes -> float32 values (0x7F/0xFF decode to NaN)."""
    return FP8_E4M3_VALUES[np.asarray(codes, dtype=np.uint8)].astype(np.float32)


def fp8_e4m3_encode(x):
    """float array -> uint8 codes. Round to nearest, ties to even mantissa; saturate to +-448;
    never produces a NaN code (a NaN input is an error, not a silent NaN weight)."""
    x = np.asarray(x, dtype=np.float64)
    if np.isnan(x).any():
        raise ValueError("fp8_e4m3_encode: NaN in input")
    mag = np.minimum(np.abs(x), FP8_MAX)
    hi = np.searchsorted(_FP8_POS, mag, side="left")        # first value >= mag
    hi = np.minimum(hi, 0x7E)
    lo = np.maximum(hi - 1, 0)
    d_lo = mag - _FP8_POS[lo]                                # exact in float64 (see module doc)
    d_hi = _FP8_POS[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    exact = _FP8_POS[hi] == mag
    code = np.where(exact | pick_hi, hi, lo).astype(np.uint8)
    neg = (x < 0) & (code != 0)                              # no negative zero codes
    return np.where(neg, code | 0x80, code).astype(np.uint8)


def bf16_encode(x):
    """float array -> uint16 bit patterns, round to nearest even (finite inputs)."""
    u = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_decode(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def scale_grid_shape(rows, cols, block=BLOCK):
    return (-(-rows // block), -(-cols // block))


def fp8_block_quantize(w, block=BLOCK):
    """2-D float weight -> (uint8 codes [R][C], float32 scale grid [ceil(R/128)][ceil(C/128)]).
    scale = block amax / 448 (float32). An all-zero block gets scale 1.0: any positive scale
    dequantizes zeros to zeros, and 1.0 avoids 0/0 (and a zero scale the engine would multiply by)."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError("fp8_block_quantize: expected a 2-D weight, got shape %s" % (w.shape,))
    rows, cols = w.shape
    gr, gc = scale_grid_shape(rows, cols, block)
    scale = np.ones((gr, gc), dtype=np.float32)
    codes = np.zeros((rows, cols), dtype=np.uint8)
    for i in range(gr):
        for j in range(gc):
            blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            amax = np.float32(np.abs(blk).max())
            s = np.float32(amax / np.float32(FP8_MAX)) if amax > 0 else np.float32(1.0)
            scale[i, j] = s
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = fp8_e4m3_encode(blk / s)
    return codes, scale


def fp8_block_dequantize(codes, scale, block=BLOCK):
    """W[r][c] = fp8(codes[r][c]) * scale[r//128][c//128], the product taken in float32 (as the
    engine does). 'weight_scale_inv' is multiplied, despite its name."""
    codes = np.asarray(codes, dtype=np.uint8)
    rows, cols = codes.shape
    if scale.shape != scale_grid_shape(rows, cols, block):
        raise ValueError("scale grid %s does not fit weight %s" % (scale.shape, codes.shape))
    s = np.repeat(np.repeat(np.asarray(scale, np.float32), block, axis=0), block, axis=1)[:rows, :cols]
    return fp8_e4m3_decode(codes) * s


# ----------------------------------------------------------------------------------------------
# config.json in the original DeepSeek format (the key set of R1's released config.json).

def deepseek_config(vocab_size, hidden_size, intermediate_size, moe_intermediate_size, num_hidden_layers,
                    num_attention_heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
                    v_head_dim, n_routed_experts, num_experts_per_tok, n_group, topk_group,
                    first_k_dense_replace, routed_scaling_factor, rope_factor, original_max_position_embeddings,
                    n_shared_experts=1, num_nextn_predict_layers=1, rms_norm_eps=1e-6, rope_theta=10000,
                    beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0, norm_topk_prob=True,
                    max_position_embeddings=None, bos_token_id=0, eos_token_id=1):
    """The R1 config.json dict (same keys, same nesting) for the given dimensions.
    max_position_embeddings defaults to factor * original_max_position_embeddings, as R1's
    (163840 = 40 * 4096): transformers' YaRN derives its factor from that ratio when the
    config has original_max_position_embeddings, so a config where they disagree would make
    transformers and DeepSeek's own code compute different frequencies."""
    if max_position_embeddings is None:
        max_position_embeddings = int(round(rope_factor * original_max_position_embeddings))
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_deepseek.DeepseekV3Config",
            "AutoModel": "modeling_deepseek.DeepseekV3Model",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
        },
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "ep_size": 1,
        "first_k_dense_replace": first_k_dense_replace,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "kv_lora_rank": kv_lora_rank,
        "max_position_embeddings": max_position_embeddings,
        "model_type": "deepseek_v3",
        "moe_intermediate_size": moe_intermediate_size,
        "moe_layer_freq": 1,
        "n_group": n_group,
        "n_routed_experts": n_routed_experts,
        "n_shared_experts": n_shared_experts,
        "norm_topk_prob": norm_topk_prob,
        "num_attention_heads": num_attention_heads,
        "num_experts_per_tok": num_experts_per_tok,
        "num_hidden_layers": num_hidden_layers,
        "num_key_value_heads": num_attention_heads,
        "num_nextn_predict_layers": num_nextn_predict_layers,
        "q_lora_rank": q_lora_rank,
        "qk_nope_head_dim": qk_nope_head_dim,
        "qk_rope_head_dim": qk_rope_head_dim,
        "quantization_config": {
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "quant_method": "fp8",
            "weight_block_size": [BLOCK, BLOCK],
        },
        "rms_norm_eps": rms_norm_eps,
        "rope_scaling": {
            "beta_fast": beta_fast,
            "beta_slow": beta_slow,
            "factor": rope_factor,
            "mscale": mscale,
            "mscale_all_dim": mscale_all_dim,
            "original_max_position_embeddings": original_max_position_embeddings,
            "type": "yarn",
        },
        "rope_theta": rope_theta,
        "routed_scaling_factor": routed_scaling_factor,
        "scoring_func": "sigmoid",
        "tie_word_embeddings": False,
        "topk_group": topk_group,
        "topk_method": "noaux_tc",
        "torch_dtype": "bfloat16",
        "transformers_version": "4.46.3",
        "use_cache": True,
        "v_head_dim": v_head_dim,
        "vocab_size": vocab_size,
    }


def generation_config(cfg):
    return {
        "_from_model_config": True,
        "bos_token_id": cfg["bos_token_id"],
        "eos_token_id": cfg["eos_token_id"],
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.95,
        "transformers_version": "4.46.3",
    }


# ----------------------------------------------------------------------------------------------
# Logical tensor list: name -> (shape, storage kind), in R1's on-disk order.
# kind: "fp8" (stored as <name> F8_E4M3 + <name minus 'weight'>weight_scale_inv F32), "bf16", "f32".

def is_moe_layer(cfg, layer):
    """MTP layers (index >= num_hidden_layers) are always MoE, as R1's layer 61."""
    if layer >= cfg["num_hidden_layers"]:
        return True
    first = cfg["first_k_dense_replace"]
    return layer >= first and (layer - first) % cfg["moe_layer_freq"] == 0


def _mlp_tensors(prefix, hidden, inter):
    return [(prefix + "gate_proj.weight", (inter, hidden), "fp8"),
            (prefix + "up_proj.weight", (inter, hidden), "fp8"),
            (prefix + "down_proj.weight", (hidden, inter), "fp8")]


def _layer_tensors(cfg, layer):
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    p = "model.layers.%d." % layer
    out = []
    if layer >= cfg["num_hidden_layers"]:  # MTP extras come first in the MTP layer
        out += [(p + "embed_tokens.weight", (cfg["vocab_size"], H), "bf16"),
                (p + "enorm.weight", (H,), "bf16"),
                (p + "hnorm.weight", (H,), "bf16"),
                (p + "eh_proj.weight", (H, 2 * H), "bf16")]
    out += [(p + "input_layernorm.weight", (H,), "bf16"),
            (p + "self_attn.q_a_proj.weight", (cfg["q_lora_rank"], H), "fp8"),
            (p + "self_attn.q_a_layernorm.weight", (cfg["q_lora_rank"],), "bf16"),
            (p + "self_attn.q_b_proj.weight", (nh * qk, cfg["q_lora_rank"]), "fp8"),
            (p + "self_attn.kv_a_proj_with_mqa.weight", (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"], H), "fp8"),
            (p + "self_attn.kv_a_layernorm.weight", (cfg["kv_lora_rank"],), "bf16"),
            (p + "self_attn.kv_b_proj.weight",
             (nh * (cfg["qk_nope_head_dim"] + cfg["v_head_dim"]), cfg["kv_lora_rank"]), "fp8"),
            (p + "self_attn.o_proj.weight", (H, nh * cfg["v_head_dim"]), "fp8"),
            (p + "post_attention_layernorm.weight", (H,), "bf16")]
    if is_moe_layer(cfg, layer):
        E, I = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
        out += [(p + "mlp.gate.weight", (E, H), "bf16"),
                (p + "mlp.gate.e_score_correction_bias", (E,), "f32")]
        out += _mlp_tensors(p + "mlp.shared_experts.", H, I * cfg["n_shared_experts"])
        for e in range(E):
            out += _mlp_tensors(p + "mlp.experts.%d." % e, H, I)
    else:
        out += _mlp_tensors(p + "mlp.", H, cfg["intermediate_size"])
    if layer >= cfg["num_hidden_layers"]:
        out += [(p + "shared_head.norm.weight", (H,), "bf16"),
                (p + "shared_head.head.weight", (cfg["vocab_size"], H), "bf16")]
    return out


def logical_tensors(cfg):
    """[(name, shape, kind)] of the logical model in R1's order: embed, layers 0..N-1 (N = main
    layers), norm, lm_head, then the MTP layer(s) at index num_hidden_layers.."""
    out = [("model.embed_tokens.weight", (cfg["vocab_size"], cfg["hidden_size"]), "bf16")]
    for layer in range(cfg["num_hidden_layers"]):
        out += _layer_tensors(cfg, layer)
    out += [("model.norm.weight", (cfg["hidden_size"],), "bf16"),
            ("lm_head.weight", (cfg["vocab_size"], cfg["hidden_size"]), "bf16")]
    for m in range(cfg["num_nextn_predict_layers"]):
        out += _layer_tensors(cfg, cfg["num_hidden_layers"] + m)
    return out


def scale_name(weight_name):
    assert weight_name.endswith(".weight")
    return weight_name + "_scale_inv"


# ----------------------------------------------------------------------------------------------
# Writer

_DT_SIZE = {"F8_E4M3": 1, "BF16": 2, "F32": 4}


def stored_tensors(cfg, weights):
    """Logical float weights -> [(name, dtype, shape, bytes)] in on-disk order (FP8 weights
    followed by their scale)."""
    out = []
    for name, shape, kind in logical_tensors(cfg):
        if name not in weights:
            raise KeyError("weights: missing tensor %s (shape %s)" % (name, shape))
        w = np.asarray(weights[name])
        if tuple(w.shape) != tuple(shape):
            raise ValueError("weights: %s has shape %s, expected %s" % (name, w.shape, shape))
        if kind == "fp8":
            codes, scale = fp8_block_quantize(w)
            out.append((name, "F8_E4M3", shape, codes.tobytes()))
            out.append((scale_name(name), "F32", scale.shape, scale.astype("<f4").tobytes()))
        elif kind == "bf16":
            out.append((name, "BF16", shape, bf16_encode(w).astype("<u2").tobytes()))
        else:
            out.append((name, "F32", shape, np.asarray(w, dtype="<f4").tobytes()))
    extra = set(weights) - {n for n, _, _ in logical_tensors(cfg)}
    if extra:
        raise KeyError("weights: unexpected tensors %s" % sorted(extra)[:5])
    return out


def _expert_of(name):
    parts = name.split(".")
    if "experts" in parts and parts[parts.index("experts") + 1].isdigit():
        i = parts.index("experts")
        return ".".join(parts[:i + 2])
    return None


def plan_shards(tensors, n_shards):
    """Cut the tensor list into n_shards runs of about equal bytes, at tensor boundaries.
    The first cut is moved inside a routed expert (after its up_proj scale, 4 of its 6 tensors
    before the cut) so that at least one expert straddles two shards, as ~162 do in R1."""
    sizes = [len(t[3]) for t in tensors]
    total = sum(sizes)
    starts = np.cumsum([0] + sizes[:-1])
    cuts = []
    for k in range(1, n_shards):
        target = total * k / n_shards
        i = int(np.searchsorted(starts, target))
        cuts.append(max(i, (cuts[-1] + 1) if cuts else 1))
    # Force the first cut into the middle of an expert near it.
    c = cuts[0]
    names = [t[0] for t in tensors]
    for j in list(range(c, len(tensors))) + list(range(c - 1, 0, -1)):
        if names[j].endswith("down_proj.weight") and _expert_of(names[j]) is not None:
            cuts[0] = j
            break
    cuts = sorted(set(cuts))
    if len(cuts) != n_shards - 1 or cuts[-1] >= len(tensors):
        raise ValueError("plan_shards: cannot cut %d tensors into %d shards" % (len(tensors), n_shards))
    bounds = [0] + cuts + [len(tensors)]
    return [tensors[bounds[i]:bounds[i + 1]] for i in range(n_shards)]


def shard_file_name(i, n):
    # R1 spells the shard count with six digits: model-00001-of-000163.safetensors
    return "model-%05d-of-%06d.safetensors" % (i + 1, n)


def write_safetensors(path, tensors):
    """tensors: [(name, dtype, shape, bytes)] written in this order; header keys sorted by name
    (as the safetensors library writes JSON) so header order != data order: readers must use
    data_offsets. Header padded with spaces to a multiple of 8 bytes."""
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, dt, shape, data in tensors:
        n = int(np.prod(shape)) * _DT_SIZE[dt]
        if n != len(data):
            raise ValueError("%s: %d bytes for shape %s %s" % (name, len(data), shape, dt))
        header[name] = {"dtype": dt, "shape": [int(s) for s in shape], "data_offsets": [off, off + n]}
        off += n
    keys = ["__metadata__"] + sorted(k for k in header if k != "__metadata__")
    hj = json.dumps({k: header[k] for k in keys}, separators=(",", ":")).encode("utf-8")
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for _, _, _, data in tensors:
            f.write(data)


def write_snapshot(out_dir, cfg, weights, n_shards=4):
    """Write a full R1-format snapshot of the logical model `weights` (name -> float array)."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = stored_tensors(cfg, weights)
    shards = plan_shards(tensors, n_shards)
    weight_map = {}
    total_size_r1 = 0
    for i, shard in enumerate(shards):
        fname = shard_file_name(i, n_shards)
        write_safetensors(os.path.join(out_dir, fname), shard)
        for name, dt, shape, data in shard:
            weight_map[name] = fname
            # R1's metadata.total_size counts FP8 as 2 bytes (it is ~2x the real payload).
            total_size_r1 += int(np.prod(shape)) * (2 if dt == "F8_E4M3" else _DT_SIZE[dt])
    index = {"metadata": {"total_size": total_size_r1},
             "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    _write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)
    _write_json(os.path.join(out_dir, "config.json"), cfg)
    _write_json(os.path.join(out_dir, "generation_config.json"), generation_config(cfg))
    return straddling_experts(out_dir)


def _write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


# ----------------------------------------------------------------------------------------------
# Reader

def read_safetensors_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError("%s: shorter than the 8-byte header length" % path)
        (n,) = struct.unpack("<Q", raw)
        size = os.path.getsize(path)
        if 8 + n > size:
            raise ValueError("%s: header length %d exceeds file size %d" % (path, n, size))
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    end = max((v["data_offsets"][1] for v in header.values()), default=0)
    if 8 + n + end != size:
        raise ValueError("%s: 8 + header %d + data %d != file size %d" % (path, n, end, size))
    return n, header


_NP_RAW = {"F8_E4M3": np.uint8, "BF16": "<u2", "F32": "<f4"}


def read_snapshot_raw(snap_dir):
    """-> (cfg, {name: (dtype, shape, raw numpy array)}, {name: (shard file, absolute offset, nbytes)})."""
    with open(os.path.join(snap_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(snap_dir, "model.safetensors.index.json")) as f:
        index = json.load(f)
    by_shard = {}
    for name, fname in index["weight_map"].items():
        by_shard.setdefault(fname, set()).add(name)
    raw, where = {}, {}
    for fname, names in sorted(by_shard.items()):
        path = os.path.join(snap_dir, fname)
        n, header = read_safetensors_header(path)
        if set(header) != names:
            raise ValueError("%s: header names differ from the index (%d vs %d)" % (fname, len(header), len(names)))
        blob = np.fromfile(path, dtype=np.uint8)
        for name, info in header.items():
            a, b = info["data_offsets"]
            dt = info["dtype"]
            arr = blob[8 + n + a:8 + n + b].view(_NP_RAW[dt]).reshape(info["shape"])
            raw[name] = (dt, tuple(info["shape"]), arr)
            where[name] = (fname, 8 + n + a, b - a)
    return cfg, raw, where


def read_snapshot(snap_dir):
    """-> (cfg, {logical name: float64 array}) with FP8 weights dequantized exactly as the engine
    does (float32 product fp8 * scale), BF16/F32 widened exactly."""
    cfg, raw, _ = read_snapshot_raw(snap_dir)
    out = {}
    for name, (dt, shape, arr) in raw.items():
        if name.endswith("_scale_inv"):
            continue
        if dt == "F8_E4M3":
            s = raw[scale_name(name)][2]
            out[name] = fp8_block_dequantize(arr, s).astype(np.float64)
        elif dt == "BF16":
            out[name] = bf16_decode(arr).astype(np.float64)
        else:
            out[name] = arr.astype(np.float64)
    return cfg, out


def straddling_experts(snap_dir):
    """Names of routed experts whose six tensors lie in two shards."""
    _, _, where = read_snapshot_raw(snap_dir)
    shard_of = {}
    for name, (fname, _, _) in where.items():
        e = _expert_of(name)
        if e is not None:
            shard_of.setdefault(e, set()).add(fname)
    return sorted(e for e, s in shard_of.items() if len(s) > 1)


# ----------------------------------------------------------------------------------------------
# transformers oracle (torch + transformers >= 5 on the GPU machine; imported lazily)

def yarn_inv_freq(cfg):
    """float64 YaRN inverse frequencies and the cos/sin attention factor (DeepSeek/HF formula)."""
    rs = cfg["rope_scaling"]
    d = cfg["qk_rope_head_dim"]
    base = float(cfg["rope_theta"])
    factor = float(rs["factor"])
    orig = float(rs["original_max_position_embeddings"])

    def corr_dim(num_rot):
        return d * math.log(orig / (num_rot * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(corr_dim(rs["beta_fast"])), 0)
    high = min(math.ceil(corr_dim(rs["beta_slow"])), d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extra_mask = 1.0 - ramp
    pos_freqs = base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    inv = (1.0 / (factor * pos_freqs)) * (1 - extra_mask) + (1.0 / pos_freqs) * extra_mask
    return inv, yarn_mscale(factor, rs["mscale"]) / yarn_mscale(factor, rs["mscale_all_dim"])


def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def softmax_scale(cfg):
    rs = cfg["rope_scaling"]
    m = yarn_mscale(float(rs["factor"]), rs["mscale_all_dim"])
    return (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5 * m * m


_FLOAT64_PATCHES = []


def patch_transformers_float64(hfm):
    """transformers' DeepSeek-V3 code casts to float32 in several places even in a float64 model
    (RMSNorm variance, rotary cos/sin, eager softmax, the router's F.linear). For a float64 oracle,
    re-compile those functions from their own source with float32 -> float64. Only forward-style
    functions without zero-argument super() are touched. -> list of patched names."""
    import inspect
    import textwrap
    import types
    patched = []

    def recompile(fn):
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            return None
        new = re.sub(r"torch\.float(32)?\b", "torch.float64", src).replace(".float()", ".double()")
        if new == src or "super(" in src:
            return None
        ns = {}
        exec(compile(new, "<float64 patch of %s>" % fn.__qualname__, "exec"), hfm.__dict__, ns)
        return ns[fn.__name__]

    for name, obj in list(vars(hfm).items()):
        if isinstance(obj, types.FunctionType) and obj.__module__ == hfm.__name__:
            f = recompile(obj)
            if f is not None:
                setattr(hfm, name, f)
                patched.append(name)
        elif isinstance(obj, type) and obj.__module__ == hfm.__name__:
            for mname, m in list(vars(obj).items()):
                if isinstance(m, types.FunctionType) and not mname.startswith("__"):
                    f = recompile(m)
                    if f is not None:
                        setattr(obj, mname, f)
                        patched.append("%s.%s" % (name, mname))
    return patched


def _hf_config(cfg, hfm, variant):
    """DeepseekV3Config from R1's config.json dict. variant 0: the keys as on disk (legacy
    rope_scaling, as from_pretrained sees R1); variant 1: transformers 5 rope_parameters."""
    d = {k: v for k, v in cfg.items() if k not in ("quantization_config", "auto_map")}
    if variant == 1:
        rp = dict(d.pop("rope_scaling"))
        rp["rope_type"] = rp.pop("type")
        rp["rope_theta"] = d["rope_theta"]
        d["rope_parameters"] = rp
    config = hfm.DeepseekV3Config.from_dict(d)
    config.rope_interleave = True          # R1 stores rope dims as interleaved pairs
    for attr in ("_attn_implementation", "_experts_implementation"):
        try:
            setattr(config, attr, "eager")
        except Exception:  # noqa: BLE001 (older versions lack the setter)
            pass
    return config


def _mlp_state(out, prefix, w, src):
    for p in ("gate_proj", "up_proj", "down_proj"):
        out[prefix + p + ".weight"] = w[src + p + ".weight"]


def _layer_state(cfg, w, layer, model_sd, dst_prefix, torch):
    """HF in-memory state of one decoder layer from the logical weights (numpy float64)."""
    src = "model.layers.%d." % layer
    out = {}
    for key in model_sd:
        if not key.startswith(dst_prefix):
            continue
        rest = key[len(dst_prefix):]
        if ".experts." in "." + rest and rest.split(".")[1] == "experts" and not rest.split(".")[2].isdigit():
            continue  # fused experts handled below
        if src + rest in w:
            out[key] = w[src + rest]
    mp = dst_prefix + "mlp.experts."
    if mp + "gate_up_proj" in model_sd:
        E, I, H = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["hidden_size"]
        gu_shape = tuple(model_sd[mp + "gate_up_proj"].shape)
        d_shape = tuple(model_sd[mp + "down_proj"].shape)
        gate = np.stack([w[src + "mlp.experts.%d.gate_proj.weight" % e] for e in range(E)])
        up = np.stack([w[src + "mlp.experts.%d.up_proj.weight" % e] for e in range(E)])
        down = np.stack([w[src + "mlp.experts.%d.down_proj.weight" % e] for e in range(E)])
        if gu_shape == (E, 2 * I, H):
            out[mp + "gate_up_proj"] = np.concatenate([gate, up], axis=1)
        elif gu_shape == (E, H, 2 * I):
            out[mp + "gate_up_proj"] = np.concatenate([gate, up], axis=1).transpose(0, 2, 1)
        else:
            raise ValueError("unexpected fused gate_up_proj shape %s" % (gu_shape,))
        if d_shape == (E, H, I):
            out[mp + "down_proj"] = down
        elif d_shape == (E, I, H):
            out[mp + "down_proj"] = down.transpose(0, 2, 1)
        else:
            raise ValueError("unexpected fused down_proj shape %s" % (d_shape,))
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}


def build_transformers_model(cfg, w):
    """transformers' DeepseekV3ForCausalLM in float64 (eager attention, eager experts) holding
    exactly the dequantized on-disk weights `w` (from read_snapshot). -> (model, info dict).
    Checks transformers' YaRN frequencies, cos/sin factor and softmax scale against the spec and
    replaces them with float64 spec values (recording any deviation in info)."""
    import torch
    import transformers
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hfm
    info = {"transformers": transformers.__version__, "torch": torch.__version__}
    H, I = cfg["hidden_size"], cfg["moe_intermediate_size"]
    if H in (I, 2 * I):
        raise ValueError("hidden_size must differ from moe_intermediate_size and its double")
    if not _FLOAT64_PATCHES:
        _FLOAT64_PATCHES.extend(patch_transformers_float64(hfm) or ["(none needed)"])
    info["float64_patches"] = list(_FLOAT64_PATCHES)
    inv_ref, cs_ref = yarn_inv_freq(cfg)
    sm_ref = softmax_scale(cfg)
    for variant in (0, 1):
        config = _hf_config(cfg, hfm, variant)
        torch.manual_seed(0)
        model = hfm.DeepseekV3ForCausalLM(config).to(torch.float64).eval()
        rot = model.model.rotary_emb
        inv_hf = rot.inv_freq.detach().double().cpu().numpy()
        dev = {"inv_freq_max_rel": float(np.max(np.abs(inv_hf - inv_ref) / inv_ref)),
               "cos_sin_factor": float(rot.attention_scaling),
               "softmax_scale": float(model.model.layers[0].self_attn.scaling)}
        if dev["inv_freq_max_rel"] < 1e-5 and abs(dev["cos_sin_factor"] - cs_ref) < 1e-9 \
                and abs(dev["softmax_scale"] - sm_ref) < 1e-9 * sm_ref:
            break
        info.setdefault("config_variants_rejected", []).append({"variant": variant, **dev})
    info["config_variant"] = ["rope_scaling as on disk", "rope_parameters"][variant]
    info["hf_rope_vs_spec"] = dict(dev, spec_cos_sin_factor=cs_ref, spec_softmax_scale=sm_ref)
    info["rope_interleave"] = bool(getattr(config, "rope_interleave", False))
    for impl in ("set_attn_implementation", "set_experts_implementation"):
        if hasattr(model, impl):
            try:
                getattr(model, impl)("eager")
            except Exception as e:  # noqa: BLE001
                info.setdefault("impl_errors", []).append("%s: %s" % (impl, e))
    info["attn_implementation"] = getattr(config, "_attn_implementation", None)
    info["experts_implementation"] = getattr(config, "_experts_implementation", None)
    # float64 spec values for the rotary frequencies and scales (transformers computed inv_freq in
    # float32 at init).
    with torch.no_grad():
        rot.inv_freq.copy_(torch.from_numpy(inv_ref))
        if hasattr(rot, "original_inv_freq"):
            rot.original_inv_freq = rot.inv_freq.clone()
        rot.attention_scaling = cs_ref
        for layer in model.model.layers:
            layer.self_attn.scaling = sm_ref
    sd = model.state_dict()
    new = {}
    for key in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"):
        new[key] = torch.from_numpy(w[key])
    for layer in range(cfg["num_hidden_layers"]):
        new.update(_layer_state(cfg, w, layer, sd, "model.layers.%d." % layer, torch))
    missing = sorted(set(sd) - set(new))
    unexpected = sorted(set(new) - set(sd))
    if missing or unexpected:
        raise ValueError("state mapping: missing %s unexpected %s" % (missing[:5], unexpected[:5]))
    for k in new:
        if tuple(new[k].shape) != tuple(sd[k].shape):
            raise ValueError("%s: shape %s vs model %s" % (k, tuple(new[k].shape), tuple(sd[k].shape)))
    model.load_state_dict(new, strict=True)
    for i, layer in enumerate(model.model.layers):
        layer.mlp._fixture_layer = i
    return model, info


class MTPReference:
    """Layer num_hidden_layers (transformers does not build it): a DeepseekV3DecoderLayer plus
    enorm/hnorm/eh_proj/shared_head, in the order vLLM and SGLang use (embedding FIRST)."""

    def __init__(self, cfg, w, model):
        import torch
        from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hfm
        L = cfg["num_hidden_layers"]
        p = "model.layers.%d." % L
        self.model = model
        self.layer = hfm.DeepseekV3DecoderLayer(model.config, layer_idx=L).to(torch.float64).eval()
        self.layer.self_attn.scaling = softmax_scale(cfg)
        sd = self.layer.state_dict()
        self.layer.load_state_dict(_layer_state(cfg, w, L, sd, "", torch), strict=True)
        self.layer.mlp._fixture_layer = L
        t = {k: torch.from_numpy(w[p + k]) for k in ("embed_tokens.weight", "eh_proj.weight",
                                                      "shared_head.head.weight")}
        self.embed, self.eh_proj, self.head = t["embed_tokens.weight"], t["eh_proj.weight"], t["shared_head.head.weight"]
        eps = cfg["rms_norm_eps"]
        self.norms = {}
        for k in ("enorm", "hnorm", "shared_head.norm"):
            n = hfm.DeepseekV3RMSNorm(cfg["hidden_size"], eps=eps).to(torch.float64)
            with torch.no_grad():
                n.weight.copy_(torch.from_numpy(w[p + k + ".weight"]))
            self.norms[k] = n

    def forward(self, h, next_ids):
        """h: [T][H] main hidden after model.norm (torch float64); next_ids: T ids x_{1..T}."""
        import torch
        T = h.shape[0]
        with torch.no_grad():
            e = self.norms["enorm"](self.embed[torch.as_tensor(next_ids)])
            u = torch.cat([e, self.norms["hnorm"](h)], dim=-1) @ self.eh_proj.T
            u = u[None]
            pos = torch.arange(T)[None]
            cos, sin = self.model.model.rotary_emb(u, pos)
            mask = torch.full((T, T), torch.finfo(torch.float64).min, dtype=torch.float64).triu(1)[None, None]
            out = self.layer(u, attention_mask=mask, position_ids=pos, position_embeddings=(cos, sin),
                             cache_position=torch.arange(T))
            if isinstance(out, tuple):
                out = out[0]
            return self.norms["shared_head.norm"](out[0]) @ self.head.T
