"""Checks the bundled tiny models: regeneration is byte-identical, and every file loads with
the reference Python libraries (tokenizers, safetensors, gguf; no transformers, no torch)."""

import hashlib
import json
import pathlib
import subprocess
import sys
import unicodedata

import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
TINY = ["tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-mistral", "tiny-mistral-swa",
        "tiny-gemma3", "tiny-qwen3-moe"]
GGUF_ARCH = {"tiny-qwen2": "qwen2", "tiny-qwen3": "qwen3", "tiny-gemma3": "gemma3",
             "tiny-qwen3-moe": "qwen3moe"}  # the others: llama
FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "model.safetensors", "model.gguf", "model-q8_0.gguf"]
SAMPLES = [
    "Hello world! The router's cache holds 12345 tokens.",
    "  leading spaces, trailing tab\t and\nnew\r\nlines\n\n",
    "Über Größe, café, español, Съешь ещё, 路由器选择服务器, 東京, 라우터, 🚀👩‍💻🇩🇪",
    "def add(a, b):\n    return a + b  # x != y && z <= 0x7f",
    "",
]


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("models")
    subprocess.run([sys.executable, str(REPO / "tools/gen_models.py"), "--out", str(out),
                    "--seed", "0", "--only", "tiny"], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("model", TINY)
def test_regeneration_is_byte_identical(regenerated, model):
    for name in FILES:
        assert _sha256(regenerated / model / name) == _sha256(MODELS / model / name), name


@pytest.mark.parametrize("model", TINY)
def test_tokenizer_round_trips(model):
    tok = Tokenizer.from_file(str(MODELS / model / "tokenizer.json"))
    for text in SAMPLES:
        ids = tok.encode(text, add_special_tokens=False).ids
        expected = unicodedata.normalize("NFC", text) if model.startswith("tiny-qwen") else text
        assert tok.decode(ids) == expected


def test_special_tokens_and_bos():
    llama3 = Tokenizer.from_file(str(MODELS / "tiny-llama3/tokenizer.json"))
    assert llama3.encode("hi").tokens[0] == "<|begin_of_text|>"
    assert llama3.encode("<|eot_id|>").ids[1] == llama3.token_to_id("<|eot_id|>")
    qwen = Tokenizer.from_file(str(MODELS / "tiny-qwen2/tokenizer.json"))
    assert qwen.encode("<|im_start|>user").ids[0] == qwen.token_to_id("<|im_start|>")
    mistral = Tokenizer.from_file(str(MODELS / "tiny-mistral/tokenizer.json"))
    enc = mistral.encode("[INST] hi\n [/INST]")
    assert enc.tokens[:2] == ["<s>", "[INST]"]
    assert "<0x0A>" in enc.tokens  # newline is not a piece: byte fallback
    assert mistral.token_to_id("<0x00>") == 5 and mistral.token_to_id("<0xFF>") == 260


@pytest.mark.parametrize("model", TINY)
def test_safetensors_match_config(model):
    config = json.loads((MODELS / model / "config.json").read_text())
    tensors = load_file(str(MODELS / model / "model.safetensors"))
    assert tensors["model.embed_tokens.weight"].shape == (config["vocab_size"], config["hidden_size"])
    assert all(t.dtype == np.float32 for t in tensors.values())
    assert ("lm_head.weight" in tensors) != config["tie_word_embeddings"]
    assert ("model.layers.0.self_attn.q_proj.bias" in tensors) == (model == "tiny-qwen2")
    layers = {k.split(".")[2] for k in tensors if k.startswith("model.layers.")}
    assert len(layers) == config["num_hidden_layers"]


@pytest.mark.parametrize("model", TINY)
@pytest.mark.parametrize("file_name", ["model.gguf", "model-q8_0.gguf"])
def test_gguf_has_tokenizer_and_tensors(model, file_name):
    config = json.loads((MODELS / model / "config.json").read_text())
    reader = gguf.GGUFReader(str(MODELS / model / file_name))
    fields = reader.fields
    arch = fields["general.architecture"].contents()
    assert arch == GGUF_ARCH.get(model, "llama")
    assert fields[f"{arch}.block_count"].contents() == config["num_hidden_layers"]
    assert fields[f"{arch}.vocab_size"].contents() == config["vocab_size"]
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token",
                "tokenizer.chat_template"):
        assert key in fields, key
    assert len(fields["tokenizer.ggml.tokens"].data) == config["vocab_size"]
    spm = model.startswith("tiny-mistral") or model == "tiny-gemma3"
    assert fields["tokenizer.ggml.model"].contents() == ("llama" if spm else "gpt2")
    assert ("tokenizer.ggml.scores" in fields) == spm
    assert ("tokenizer.ggml.merges" in fields) != spm
    names = {t.name for t in reader.tensors}
    assert "token_embd.weight" in names and "blk.0.attn_q.weight" in names
    assert ("blk.0.attn_q_norm.weight" in names) == (model in ("tiny-qwen3", "tiny-gemma3",
                                                              "tiny-qwen3-moe"))
    assert ("blk.0.post_ffw_norm.weight" in names) == (model == "tiny-gemma3")
    assert ("output.weight" in names) != config["tie_word_embeddings"]
    assert ("rope_freqs.weight" in names) == (model == "tiny-llama3")
    if config.get("num_experts"):  # stacked [E, rows, cols] experts, an F32 router
        assert fields[f"{arch}.expert_count"].contents() == config["num_experts"]
        assert fields[f"{arch}.expert_used_count"].contents() == config["num_experts_per_tok"]
        tensors = {t.name: t for t in reader.tensors}
        assert "blk.0.ffn_gate.weight" not in tensors
        down = tensors["blk.1.ffn_down_exps.weight"]
        assert down.shape.tolist() == [config["moe_intermediate_size"], config["hidden_size"],
                                       config["num_experts"]]  # GGUF lists dims innermost first
        assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    window = fields.get(f"{arch}.attention.sliding_window")
    windowed = model in ("tiny-mistral-swa", "tiny-gemma3")
    assert (window.contents() if window else None) == (24 if windowed else None)
    if spm:  # Gemma's SPM prepends no space; Llama-2's / Mistral's does.
        assert fields["tokenizer.ggml.add_space_prefix"].contents() == (model != "tiny-gemma3")


def test_gguf_f32_weights_equal_safetensors():
    """Unpermuted tensors are copied exactly; Q/K are the rope permutation of the HF rows."""
    sys.path.insert(0, str(REPO / "tools"))
    from switchyard_models.gguf_export import permute_for_llama_rope

    for model in TINY:
        config = json.loads((MODELS / model / "config.json").read_text())
        hf = load_file(str(MODELS / model / "model.safetensors"))
        reader = gguf.GGUFReader(str(MODELS / model / "model.gguf"))
        gg = {t.name: np.asarray(t.data).reshape(tuple(reversed(t.shape.tolist()))) for t in reader.tensors}
        if config.get("num_experts"):
            np.testing.assert_array_equal(gg["blk.1.ffn_down_exps.weight"][3],
                                          hf["model.layers.1.mlp.experts.3.down_proj.weight"])
        else:
            np.testing.assert_array_equal(gg["blk.1.ffn_down.weight"],
                                          hf["model.layers.1.mlp.down_proj.weight"])
        q = hf["model.layers.0.self_attn.q_proj.weight"]
        if GGUF_ARCH.get(model, "llama") == "llama":
            q = permute_for_llama_rope(q, config["num_attention_heads"])
        np.testing.assert_array_equal(gg["blk.0.attn_q.weight"], q)
        if model == "tiny-gemma3":  # llama.cpp's gemma3 norms hold HF's 1 + weight
            for hf_name, gg_name in (("model.layers.2.post_attention_layernorm.weight",
                                      "blk.2.post_attention_norm.weight"),
                                     ("model.layers.0.self_attn.k_norm.weight",
                                      "blk.0.attn_k_norm.weight")):
                np.testing.assert_array_equal(gg[gg_name], hf[hf_name] + np.float32(1))
