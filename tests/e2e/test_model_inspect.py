"""`switchyard model inspect` against files written by the reference Python writers
(safetensors, gguf): names, shapes, dtypes and parameter counts must agree, and corrupt
files must fail with a message naming the file and the field."""

import json
import pathlib
import struct

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import quantize
from safetensors import safe_open
from safetensors.numpy import save_file

from conftest import MODELS_DIR

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 16, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
}


def inspect_json(switchyard, path):
    return json.loads(switchyard("model", "inspect", path, "--json").stdout)


def random_tensors(rng):
    return {
        "model.embed_tokens.weight": rng.standard_normal((16, 32)).astype(np.float32),
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((32, 32)).astype(np.float16),
        "model.layers.0.input_layernorm.weight": np.ones(32, dtype=np.float32),
        "lm_head.weight": rng.standard_normal((16, 32)).astype(np.float16),
        "extra.ids": np.arange(5, dtype=np.int32),
    }


def write_bf16_safetensors(path, name, shape):
    """numpy has no bfloat16, so this one is written by hand per the format spec."""
    nbytes = int(np.prod(shape)) * 2
    header = json.dumps({name: {"dtype": "BF16", "shape": list(shape),
                                "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(nbytes))


def expected_from_safetensors(files):
    out = {}
    for f in files:
        with safe_open(str(f), framework="numpy") as st:
            for key in st.keys():
                sl = st.get_slice(key)
                out[key] = (sl.get_dtype(), list(sl.get_shape()))
    return out


def reported(info):
    return {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}


def test_single_safetensors_matches_reference(switchyard, tmp_path):
    rng = np.random.default_rng(1)
    save_file(random_tensors(rng), str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    info = inspect_json(switchyard, tmp_path)
    expected = expected_from_safetensors([tmp_path / "model.safetensors"])
    assert reported(info) == expected
    assert info["format"] == "safetensors"
    assert info["parameter_count"] == sum(int(np.prod(s)) for _, s in expected.values())
    assert info["dtypes"]["F16"]["tensors"] == 2
    assert info["architecture"] == "LlamaForCausalLM"
    assert info["head_dim"] == 8 and info["num_key_value_heads"] == 2
    assert info["tokenizer"] is None and info["chat_template"] is False


def test_sharded_safetensors_matches_reference(switchyard, tmp_path):
    rng = np.random.default_rng(2)
    tensors = random_tensors(rng)
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:2],
              "model-00002-of-00002.safetensors": names[2:]}
    weight_map = {}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(tmp_path / shard))
        weight_map.update({k: shard for k in keys})
    write_bf16_safetensors(tmp_path / "model-bf16.safetensors", "model.norm.weight", (32,))
    weight_map["model.norm.weight"] = "model-bf16.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    info = inspect_json(switchyard, tmp_path)
    assert info["format"] == "sharded safetensors"
    assert len(info["weight_files"]) == 3
    expected = expected_from_safetensors(
        [tmp_path / s for s in [*shards, "model-bf16.safetensors"]])
    assert reported(info) == expected
    assert info["dtypes"]["BF16"] == {"tensors": 1, "bytes": 64}

    # The index names a shard for a tensor that lives elsewhere.
    weight_map["model.norm.weight"] = "model-00001-of-00002.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    proc = switchyard("model", "inspect", tmp_path, check=False)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "model.safetensors.index.json" in err and "weight_map" in err
    assert "model.norm.weight" in err


def gguf_writer(path):
    """A writer with the metadata of a tiny Llama (hidden 32, 16 tokens) and no tensors."""
    writer = GGUFWriter(str(path), "llama")
    writer.add_context_length(128)
    writer.add_embedding_length(32)
    writer.add_block_count(1)
    writer.add_feed_forward_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"t{i}" for i in range(16)])
    writer.add_token_scores([float(-i) for i in range(16)])
    writer.add_chat_template("{{ messages }}")
    return writer


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_gguf(path, rng):
    writer = gguf_writer(path)
    writer.add_tensor("token_embd.weight", rng.standard_normal((16, 32)).astype(np.float32))
    writer.add_tensor("output.weight", rng.standard_normal((16, 32)).astype(np.float16))
    for qtype in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0, GGMLQuantizationType.BF16):
        data = rng.standard_normal((8, 64)).astype(np.float32)
        writer.add_tensor(f"blk.0.{qtype.name.lower()}.weight", quantize(data, qtype),
                          raw_dtype=qtype)
    finish(writer)


def test_gguf_matches_reference(switchyard, tmp_path):
    path = tmp_path / "model.gguf"
    write_gguf(path, np.random.default_rng(3))
    info = inspect_json(switchyard, path)
    reader = GGUFReader(str(path))
    expected = {t.name: (t.tensor_type.name, [int(d) for d in reversed(t.shape)])
                for t in reader.tensors}
    assert reported(info) == expected
    assert info["parameter_count"] == sum(int(t.n_elements) for t in reader.tensors)
    assert {t["name"]: t["bytes"] for t in info["tensors"]} == {
        t.name: int(t.n_bytes) for t in reader.tensors}
    assert info["format"] == "gguf" and info["gguf_version"] == 3
    assert info["tokenizer"] == {"kind": "llama", "source": "gguf", "vocab_size": 16}
    assert info["chat_template"] is True
    assert info["num_key_value_heads"] == 2 and info["max_position_embeddings"] == 128
    assert set(info["gguf_metadata"]) == {k for k in reader.fields if not k.startswith("GGUF.")}


def test_dtype_table_matches_gguf_py(switchyard, tmp_path):
    """Every GGML type's block geometry agrees with gguf-py: a file holding one tensor of
    each type opens, and shapes and byte sizes equal gguf-py's."""
    path = tmp_path / "types.gguf"
    writer = gguf_writer(path)
    for qtype, (block, type_size) in GGML_QUANT_SIZES.items():
        raw = np.zeros((2, (1024 // block) * type_size), dtype=np.uint8)
        writer.add_tensor(f"t_{qtype.name}", raw, raw_dtype=qtype)
    finish(writer)
    info = inspect_json(switchyard, path)
    reader = GGUFReader(str(path))
    assert {t["name"]: (t["dtype"], t["shape"], t["bytes"]) for t in info["tensors"]} == {
        t.name: (t.tensor_type.name, [int(d) for d in reversed(t.shape)], int(t.n_bytes))
        for t in reader.tensors}


CORRUPTIONS = [
    ("truncated", lambda b: b[: len(b) // 2], "field '"),
    ("header_past_eof", lambda b: struct.pack("<Q", len(b)) + b[8:], "header_length"),
    ("bad_json", lambda b: b[:8] + b"[" + b[9:], "header"),
]


@pytest.mark.parametrize("name,corrupt,field", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_safetensors_names_file_and_field(switchyard, tmp_path, name, corrupt, field):
    save_file(random_tensors(np.random.default_rng(4)), str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(corrupt(data))
    proc = switchyard("model", "inspect", tmp_path, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert str(tmp_path / "model.safetensors") in err and field in err, err


def test_corrupt_gguf_names_file_and_field(switchyard, tmp_path):
    path = tmp_path / "model.gguf"
    write_gguf(path, np.random.default_rng(5))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    proc = switchyard("model", "inspect", path, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and str(path) in err and "offset" in err, err


TINY = sorted(p.name for p in MODELS_DIR.glob("tiny-*")) if MODELS_DIR.exists() else []


@pytest.mark.parametrize("model", TINY)
def test_tiny_models(switchyard, model):
    directory = MODELS_DIR / model
    info = inspect_json(switchyard, directory)
    expected = expected_from_safetensors([directory / "model.safetensors"])
    assert reported(info) == expected
    config = json.loads((directory / "config.json").read_text())
    assert info["architecture"] == config["architectures"][0]
    assert info["vocab_size"] == config["vocab_size"]
    assert info["chat_template"] is True
    for gguf_name in ("model.gguf", "model-q8_0.gguf"):
        gguf_info = inspect_json(switchyard, directory / gguf_name)
        reader = GGUFReader(str(directory / gguf_name))
        assert gguf_info["parameter_count"] == sum(int(t.n_elements) for t in reader.tensors)
        assert gguf_info["num_hidden_layers"] == config["num_hidden_layers"]
        assert gguf_info["hidden_size"] == config["hidden_size"]
        assert gguf_info["num_key_value_heads"] == config.get(
            "num_key_value_heads", config["num_attention_heads"])
