"""Exports a generated model (HF config, tokenizer files, seeded weights) to GGUF.

Tensor names follow llama.cpp. For the "llama" architecture the Q and K projections are
permuted from Hugging Face's rotate-half rope layout to llama.cpp's interleaved-pair layout,
as llama.cpp's HF converter does; "qwen2" and "qwen3" use NeoX-style rope in llama.cpp and
are written unpermuted, as is "gemma3", whose norm weights get Gemma's +1 added (llama.cpp's
converter does the same: its RMSNorm multiplies by the weight alone). Llama-3 rope scaling becomes a `rope_freqs.weight` tensor of per-frequency
divisors. quant_types picks each tensor's type in the file type, as llama-quantize does.
"""

import json
import math

import gguf
import numpy as np

from . import quant_types, weights

# llama.cpp's architecture per HF model_type.
GGUF_ARCHS = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
              "qwen3_moe": "qwen3moe", "gemma3_text": "gemma3"}

_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",  # the MoE router
}
# A MoE layer's experts (HF mlp.experts.E.<proj>.weight) stack into one 3-D tensor each.
_EXPERT_NAMES = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps",
                 "down_proj": "ffn_down_exps"}


# Gemma's sandwich norms: its post_attention_layernorm follows attention.
_GEMMA3_LAYER_NAMES = {
    **_LAYER_NAMES,
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}


def gguf_tensor_name(hf_name: str, arch: str = "llama") -> str:
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf_name.split(".", 3)
    if rest.startswith("mlp.experts."):
        return f"blk.{layer}.{_EXPERT_NAMES[rest.split('.')[3]]}.weight"
    names = _GEMMA3_LAYER_NAMES if arch == "gemma3" else _LAYER_NAMES
    return f"blk.{layer}.{names[rest]}"


def permute_for_llama_rope(w: np.ndarray, num_heads: int) -> np.ndarray:
    """Reorders each head's rows from [first halves..., second halves...] to interleaved pairs."""
    return (w.reshape(num_heads, 2, w.shape[0] // num_heads // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def llama3_rope_factors(config: dict) -> np.ndarray:
    """Per-frequency divisors for Llama-3 rope scaling (the `rope_freqs.weight` tensor)."""
    scaling = config["rope_scaling"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_ctx = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * config["rope_theta"] ** (i / head_dim)
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def _token_metadata(tokenizer: dict, tok_config: dict, vocab_size: int) -> dict:
    model = tokenizer["model"]
    id_to_token = {i: t for t, i in model["vocab"].items()}
    added = {a["id"]: a for a in tokenizer["added_tokens"]}
    id_to_token.update({i: a["content"] for i, a in added.items()})
    spm = bool(model.get("byte_fallback"))
    prepend = "Prepend" in json.dumps(tokenizer.get("normalizer"))
    first_piece = max((i for i, a in added.items() if i < len(model["vocab"])), default=-1) + 1
    if spm:
        first_piece = max(first_piece, max(model["vocab"][f"<0x{b:02X}>"] for b in range(256)) + 1)
    tokens, types, scores = [], [], []
    for i in range(vocab_size):
        text = id_to_token.get(i)
        if text is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(text)
            if text == model.get("unk_token"):
                types.append(gguf.TokenType.UNKNOWN)
            else:
                types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        elif spm and text.startswith("<0x") and len(text) == 6:
            tokens.append(text)
            types.append(gguf.TokenType.BYTE)
        else:
            tokens.append(text)
            types.append(gguf.TokenType.NORMAL)
        scores.append(-float(i - first_piece) if spm and i >= first_piece and i not in added else 0.0)

    def token_id(field):
        value = tok_config.get(field)
        if isinstance(value, dict):
            value = value.get("content")
        return None if value is None else tokens.index(value)

    if "add_bos_token" in tok_config:
        add_bos = bool(tok_config["add_bos_token"])
    else:
        add_bos = "TemplateProcessing" in json.dumps(tokenizer.get("post_processor"))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return {
        "spm": spm, "add_space_prefix": prepend, "tokens": tokens, "types": types, "scores": scores, "merges": merges,
        "bos": token_id("bos_token"), "eos": token_id("eos_token"), "unk": token_id("unk_token"),
        "pad": token_id("pad_token"), "add_bos": add_bos,
        "add_eos": bool(tok_config.get("add_eos_token", False)),
        "ids": {t: i for i, t in enumerate(tokens)},
    }


def _gguf_values(spec, config: dict, arch: str, seed: int, bf16_values: bool) -> np.ndarray:
    values = weights.make_tensor(spec, seed, bf16=bf16_values)
    if arch == "llama" and spec.name.endswith("q_proj.weight"):
        values = permute_for_llama_rope(values, config["num_attention_heads"])
    elif arch == "llama" and spec.name.endswith("k_proj.weight"):
        values = permute_for_llama_rope(values, config["num_key_value_heads"])
    elif spec.kind == "norm0":
        values = values + np.float32(1.0)  # llama.cpp's gemma3 norms hold 1 + weight
    return values


def write_gguf(path, name: str, config: dict, tokenizer_json: str, tok_config: dict,
               pre: str | None, seed: int, file_type: str, bf16_values: bool) -> None:
    """Writes one GGUF file; tensors are recomputed from (seed, name), one at a time."""
    ftype = quant_types.FILE_TYPES[file_type][0]
    arch = GGUF_ARCHS[config["model_type"]]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_rope_freq_base(config["rope_theta"])
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(config["vocab_size"])
    # As the engine reads config.json: Mistral's and Gemma's window applies unless
    # use_sliding_window is false; Qwen2's only when it is true.
    if config.get("use_sliding_window", config["model_type"] in ("mistral", "gemma3_text")):
        if config.get("sliding_window") is not None:
            w.add_sliding_window(config["sliding_window"])
    scaling = config.get("rope_scaling") or {}
    if scaling.get("rope_type", scaling.get("type")) == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(scaling["factor"])
    if config.get("num_experts"):
        w.add_expert_count(config["num_experts"])
        w.add_expert_used_count(config["num_experts_per_tok"])
        w.add_expert_feed_forward_length(config["moe_intermediate_size"])
    if arch == "gemma3" and config.get("final_logit_softcapping") is not None:
        w.add_final_logit_softcapping(config["final_logit_softcapping"])

    tok = _token_metadata(json.loads(tokenizer_json), tok_config, config["vocab_size"])
    if tok["bos"] is None:
        tok["bos"] = config.get("bos_token_id")  # Qwen2 has no BOS text but names an id.
    if tok["spm"]:
        w.add_tokenizer_model("llama")
        w.add_token_scores(tok["scores"])
        w.add_add_space_prefix(tok["add_space_prefix"])
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_merges(tok["merges"])
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                     ("unk", w.add_unk_token_id), ("pad", w.add_pad_token_id)):
        if tok[key] is not None:
            add(tok[key])
    for text, add in (("<|eot_id|>", w.add_eot_token_id), ("<|eom_id|>", w.add_eom_token_id),
                      ("<end_of_turn>", w.add_eot_token_id)):
        if text in tok["ids"]:
            add(tok["ids"][text])
    w.add_add_bos_token(tok["add_bos"])
    w.add_add_eos_token(tok["add_eos"])
    if tok_config.get("chat_template"):
        w.add_chat_template(tok_config["chat_template"])

    # GGUF tensors in spec order; a stacked expert tensor takes the place of its first expert.
    groups: dict[str, list] = {}
    for spec in weights.tensor_specs(config):
        groups.setdefault(gguf_tensor_name(spec.name, arch), []).append(spec)
    rope_factors = None
    if (config.get("rope_scaling") or {}).get("rope_type") == "llama3":
        rope_factors = llama3_rope_factors(config)
        w.add_tensor_info("rope_freqs.weight", rope_factors.shape, np.dtype(np.float32),
                          rope_factors.nbytes, gguf.GGMLQuantizationType.F32)
    qtypes = {}
    for gname, group in groups.items():
        shape = group[0].shape if len(group) == 1 else (len(group), *group[0].shape)
        qtypes[gname] = quant_types.tensor_type(gname, shape, file_type,
                                                config["num_hidden_layers"],
                                                config.get("tie_word_embeddings", False))
        shape, dtype, nbytes = quant_types.encoded_layout(shape, qtypes[gname])
        w.add_tensor_info(gname, shape, dtype, nbytes, qtypes[gname])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    if rope_factors is not None:
        w.write_tensor_data(rope_factors)
    for gname, group in groups.items():
        values = np.stack([_gguf_values(s, config, arch, seed, bf16_values) for s in group])
        if len(group) == 1:
            values = values[0]
        w.write_tensor_data(quant_types.encode(values, qtypes[gname]))
    w.close()
