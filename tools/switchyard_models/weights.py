"""Seeded random weights in Hugging Face layout and a streaming safetensors writer.

Each tensor is drawn from its own generator, seeded by (seed, crc32(name)), so a tensor's
values depend only on the seed and its name: the writers can recompute tensors one at a time
instead of holding a 1B-parameter model in memory.
"""

import dataclasses
import json
import zlib

import numpy as np

INIT_STD = 0.02
# MoE routers are drawn wider than other matrices, so that each token's top-k experts win by
# clear margins and routing does not hinge on rounding.
ROUTER_STD = 1.0


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str  # Hugging Face name, e.g. model.layers.0.self_attn.q_proj.weight
    shape: tuple[int, ...]
    # "linear" (normal * 0.02), "bias" (normal * 0.02), "norm" (1 + normal * 0.1),
    # "norm0" (normal * 0.1: Gemma's norms, applied as 1 + weight) or "router" (normal * 1.0)
    kind: str


def tensor_specs(config: dict) -> list[TensorSpec]:
    """The tensors of a Llama / Mistral / Qwen2 / Qwen3 / Qwen3-MoE / Gemma 3 decoder described
    by an HF config.json dict."""
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    q_dim = config["num_attention_heads"] * head_dim
    kv_dim = config["num_key_value_heads"] * head_dim
    inter = config["intermediate_size"]
    qkv_bias = config["model_type"] == "qwen2" or config.get("attention_bias", False)
    gemma = config["model_type"] == "gemma3_text"
    norm = "norm0" if gemma else "norm"
    specs = [TensorSpec("model.embed_tokens.weight", (config["vocab_size"], hidden), "linear")]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs += [
            TensorSpec(p + "input_layernorm.weight", (hidden,), norm),
            TensorSpec(p + "self_attn.q_proj.weight", (q_dim, hidden), "linear"),
            TensorSpec(p + "self_attn.k_proj.weight", (kv_dim, hidden), "linear"),
            TensorSpec(p + "self_attn.v_proj.weight", (kv_dim, hidden), "linear"),
        ]
        if qkv_bias:
            specs += [
                TensorSpec(p + "self_attn.q_proj.bias", (q_dim,), "bias"),
                TensorSpec(p + "self_attn.k_proj.bias", (kv_dim,), "bias"),
                TensorSpec(p + "self_attn.v_proj.bias", (kv_dim,), "bias"),
            ]
        if config["model_type"] in ("qwen3", "qwen3_moe", "gemma3_text"):
            specs += [
                TensorSpec(p + "self_attn.q_norm.weight", (head_dim,), norm),
                TensorSpec(p + "self_attn.k_norm.weight", (head_dim,), norm),
            ]
        specs += [
            TensorSpec(p + "self_attn.o_proj.weight", (hidden, q_dim), "linear"),
            TensorSpec(p + "post_attention_layernorm.weight", (hidden,), norm),
        ]
        if gemma:  # sandwich norms: post_attention_layernorm above follows attention
            specs += [
                TensorSpec(p + "pre_feedforward_layernorm.weight", (hidden,), norm),
                TensorSpec(p + "post_feedforward_layernorm.weight", (hidden,), norm),
            ]
        if config.get("num_experts"):
            specs += _expert_specs(config, p)
            continue
        specs += [
            TensorSpec(p + "mlp.gate_proj.weight", (inter, hidden), "linear"),
            TensorSpec(p + "mlp.up_proj.weight", (inter, hidden), "linear"),
            TensorSpec(p + "mlp.down_proj.weight", (hidden, inter), "linear"),
        ]
    specs.append(TensorSpec("model.norm.weight", (hidden,), norm))
    if not config["tie_word_embeddings"]:
        specs.append(TensorSpec("lm_head.weight", (config["vocab_size"], hidden), "linear"))
    return specs


def _expert_specs(config: dict, prefix: str) -> list[TensorSpec]:
    """A Qwen3-MoE layer's router and experts, in the per-expert layout of the released
    checkpoints (transformers fuses them into 3-D parameters when it loads them)."""
    hidden, inter = config["hidden_size"], config["moe_intermediate_size"]
    specs = [TensorSpec(prefix + "mlp.gate.weight", (config["num_experts"], hidden), "router")]
    for e in range(config["num_experts"]):
        q = f"{prefix}mlp.experts.{e}."
        specs += [
            TensorSpec(q + "gate_proj.weight", (inter, hidden), "linear"),
            TensorSpec(q + "up_proj.weight", (inter, hidden), "linear"),
            TensorSpec(q + "down_proj.weight", (hidden, inter), "linear"),
        ]
    return specs


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Rounds float32 values to the nearest bfloat16 (ties to even); returns the raw uint16."""
    bits = x.astype(np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)


def make_tensor(spec: TensorSpec, seed: int, bf16: bool = False) -> np.ndarray:
    """float32 values of one tensor; with bf16=True they are exactly representable in bf16."""
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(spec.name.encode())]))
    values = rng.standard_normal(spec.shape, dtype=np.float32)
    if spec.kind == "norm":
        values = np.float32(1.0) + values * np.float32(0.1)
    elif spec.kind == "norm0":
        values *= np.float32(0.1)
    elif spec.kind == "router":
        values *= np.float32(ROUTER_STD)
    else:
        values *= np.float32(INIT_STD)
    return bf16_to_f32(round_to_bf16(values)) if bf16 else values


def write_safetensors(path, specs: list[TensorSpec], seed: int, dtype: str) -> None:
    """Writes the tensors in spec order as F32 or BF16, one tensor in memory at a time."""
    if dtype not in ("F32", "BF16"):
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    item = 4 if dtype == "F32" else 2
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for s in specs:
        nbytes = int(np.prod(s.shape)) * item
        header[s.name] = {"dtype": dtype, "shape": list(s.shape),
                          "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for s in specs:
            t = make_tensor(s, seed, bf16=dtype == "BF16")
            data = round_to_bf16(t) if dtype == "BF16" else t
            f.write(np.ascontiguousarray(data).astype("<" + data.dtype.str[1:]).tobytes())
