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


# Tensor groups and the memory estimate. The expected values come from the files through
# gguf-py's own name map (HF and GGUF names to llama.cpp's tensor kinds) and its reader or the
# safetensors headers; the KV cache is 2 (K and V) x layers x tokens rounded up to whole
# 16-token blocks x KV heads x head_dim x the element size (F32 when layer 0's Q projection
# is F32, else F16); under a sliding window W a sequence holds at most the blocks of W - 1
# tokens and one step's 2048 (the engine's --max-num-batched-tokens), plus one.
SMOLLM2_GGUF = MODELS_DIR.parent / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GROUP_OF_KIND = {
    "TOKEN_EMBD": "token embedding", "ATTN_Q": "attention q", "ATTN_K": "attention k",
    "ATTN_V": "attention v", "ATTN_OUT": "attention output", "FFN_GATE": "ffn gate",
    "FFN_UP": "ffn up", "FFN_DOWN": "ffn down", "OUTPUT": "output", "ROPE_FREQS": "rope",
    "ATTN_NORM": "norms", "FFN_NORM": "norms", "OUTPUT_NORM": "norms",
    "ATTN_Q_NORM": "norms", "ATTN_K_NORM": "norms", "ATTN_POST_NORM": "norms",
    "FFN_POST_NORM": "norms", "FFN_GATE_INP": "ffn router", "FFN_GATE_EXP": "ffn gate",
    "FFN_UP_EXP": "ffn up", "FFN_DOWN_EXP": "ffn down",
}
# gguf-py's architecture for a GGUF's general.architecture or an HF config's model_type.
ARCH_OF = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
           "qwen3moe": "qwen3moe", "qwen3_moe": "qwen3moe", "gemma3": "gemma3",
           "gemma3_text": "gemma3"}


def expected_groups(tensors, num_layers, arch="llama"):
    """tensors: (name, dtype name, elements, bytes); arch: a GGUF architecture or HF
    model_type (its tensor names). Returns our JSON's tensor_groups as
    {group: (tensors, parameters, bytes, {dtype: {"tensors", "bytes"}})}."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map
    model_arch = {v: k for k, v in MODEL_ARCH_NAMES.items()}[ARCH_OF[arch]]
    name_map = get_tensor_name_map(model_arch, num_layers)
    groups = {}
    for name, dtype, elements, nbytes in tensors:
        kind = name_map.get_type(name, try_suffixes=(".weight", ".bias"))
        group = GROUP_OF_KIND.get(kind.name, "other") if kind is not None else "other"
        if group == "other" and ".mlp.experts." in name:  # HF's per-expert matrices
            group = {"gate_proj": "ffn gate", "up_proj": "ffn up",
                     "down_proj": "ffn down"}.get(name.split(".")[-2], "other")
        if group == "other" and "norm" in name:  # e.g. Gemma 3's pre/post FFN norms
            group = "norms"
        if name.endswith(".bias") and group.startswith("attention"):
            group = "attention bias"
        count, params, total, dtypes = groups.get(group, (0, 0, 0, {}))
        d = dtypes.setdefault(dtype, {"tensors": 0, "bytes": 0})
        d["tensors"] += 1
        d["bytes"] += nbytes
        groups[group] = (count + 1, params + elements, total + nbytes, dtypes)
    return groups


def reported_groups(info):
    return {g["group"]: (g["tensors"], g["parameters"], g["bytes"], g["dtypes"])
            for g in info["tensor_groups"]}


def expected_memory(layers, kv_heads, head_dim, q0_dtype, tokens, weights_bytes, window=0):
    kv_dtype, size = ("F32", 4) if q0_dtype == "F32" else ("F16", 2)
    blocks = -(-tokens // 16)
    if window:
        blocks = min(blocks, -(-(window - 1 + 2048) // 16) + 1)
    kv = 2 * layers * blocks * 16 * kv_heads * head_dim * size
    return {"max_model_len": tokens, "block_size": 16, "sliding_window": window,
            "kv_dtype": kv_dtype, "kv_blocks": blocks,
            "kv_block_bytes": kv // blocks, "kv_cache_bytes": kv,
            "weights_bytes": weights_bytes, "total_bytes": weights_bytes + kv}


def reported_memory(info):
    """info's memory estimate less the bytes of the backend's copies of the matrices, which
    this host's CPU decides, not the file (test_memory_estimate_is_what_the_engine_allocates
    compares them with the engine's); the total must count them."""
    memory = dict(info["memory"])
    packed = memory.pop("packed_bytes")
    assert memory["total_bytes"] == memory["weights_bytes"] + packed + memory["kv_cache_bytes"]
    memory["total_bytes"] -= packed
    return memory


def gguf_tensors(reader):
    return [(t.name, t.tensor_type.name, int(t.n_elements), int(t.n_bytes))
            for t in reader.tensors]


def check_gguf_groups_and_memory(switchyard, path, *flags, tokens=None):
    info = json.loads(switchyard("model", "inspect", path, "--json", *flags).stdout)
    reader = GGUFReader(str(path))
    field = lambda key: int(reader.fields[key].contents())  # noqa: E731
    arch = reader.fields["general.architecture"].contents()
    layers = field(f"{arch}.block_count")
    tensors = gguf_tensors(reader)
    assert reported_groups(info) == expected_groups(tensors, layers, arch)
    q0 = next(t.tensor_type.name for t in reader.tensors if t.name == "blk.0.attn_q.weight")
    heads = field(f"{arch}.attention.head_count")
    window_key = f"{arch}.attention.sliding_window"
    assert reported_memory(info) == expected_memory(
        layers, field(f"{arch}.attention.head_count_kv"),
        field(f"{arch}.attention.key_length") if f"{arch}.attention.key_length" in reader.fields
        else field(f"{arch}.embedding_length") // heads, q0,
        tokens or field(f"{arch}.context_length"), sum(t[3] for t in tensors),
        # Gemma 3 interleaves global layers, which keep every block: no window for the cache.
        field(window_key) if window_key in reader.fields and arch != "gemma3" else 0)
    return info


def write_mixed_gguf(path):
    """A two-layer Llama GGUF quantised as Q4_K_M files are: Q4_K matrices, but Q6_K for the
    output and for layer 1's ffn_down and attn_v; F32 norms, a Q8_0 embedding, q biases."""
    writer = gguf_writer(path)
    d, f, kv = 32, 256, 16  # hidden, ffn, KV heads x head_dim; K-quants need 256-wide rows

    def raw(name, rows, cols, qtype):
        block, type_size = GGML_QUANT_SIZES[qtype]
        writer.add_tensor(name, np.zeros((rows, cols // block * type_size), dtype=np.uint8),
                          raw_dtype=qtype)

    q4k, q6k = GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K
    writer.add_tensor("token_embd.weight", np.zeros((16, d), dtype=np.float32))
    for i in range(2):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.bias", np.zeros(d, dtype=np.float32))
        # 256-wide rows: the writer's metadata says hidden 32, but inspect reads shapes only.
        raw(f"blk.{i}.attn_q.weight", d, 256, q4k)
        raw(f"blk.{i}.attn_k.weight", kv, 256, q4k)
        raw(f"blk.{i}.attn_v.weight", kv, 256, q6k if i == 1 else q4k)
        raw(f"blk.{i}.attn_output.weight", d, 256, q4k)
        raw(f"blk.{i}.ffn_gate.weight", f, 256, q4k)
        raw(f"blk.{i}.ffn_up.weight", f, 256, q4k)
        raw(f"blk.{i}.ffn_down.weight", d, f, q6k if i == 1 else q4k)
    writer.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    raw("output.weight", 16, 256, q6k)
    finish(writer)


def test_groups_and_memory_of_a_mixed_quantisation(switchyard, tmp_path):
    path = tmp_path / "mixed.gguf"
    write_mixed_gguf(path)
    reader = GGUFReader(str(path))
    info = json.loads(switchyard("model", "inspect", path, "--json",
                                 "--max-model-len", "100").stdout)
    groups = reported_groups(info)
    assert groups == expected_groups(gguf_tensors(reader), 2)
    assert set(groups["ffn down"][3]) == {"Q4_K", "Q6_K"}
    assert set(groups["attention v"][3]) == {"Q4_K", "Q6_K"}
    assert groups["attention bias"][0] == 2 and groups["norms"][0] == 5
    # The KV cache follows the metadata (gguf_writer: 1 layer, 4 heads, 2 KV heads, hidden 32,
    # so head_dim 8), in F16 as the layers are Q4_K.
    assert reported_memory(info) == expected_memory(1, 2, 8, "Q4_K", 100, sum(
        t[3] for t in gguf_tensors(reader)))
    text = switchyard("model", "inspect", path, "--max-model-len", "100").stdout.decode()
    assert "ffn down" in text and "Q4_K x1  Q6_K x1" in text
    assert "at --max-model-len 100" in text and "7 blocks of 16 tokens" in text


def numpy_dtype_name(dtype):
    return {"float32": "F32", "float16": "F16", "int32": "I32"}[str(dtype)]


@pytest.mark.parametrize("model", TINY)
def test_tiny_models_groups_and_memory(switchyard, model):
    directory = MODELS_DIR / model
    config = json.loads((directory / "config.json").read_text())
    layers = config["num_hidden_layers"]
    info = inspect_json(switchyard, directory)
    tensors = []
    with safe_open(str(directory / "model.safetensors"), framework="numpy") as st:
        for key in st.keys():
            t = st.get_tensor(key)
            tensors.append((key, numpy_dtype_name(t.dtype), int(t.size), int(t.nbytes)))
    assert reported_groups(info) == expected_groups(tensors, layers, config["model_type"])
    q0 = next(d for n, d, _, _ in tensors if n == "model.layers.0.self_attn.q_proj.weight")
    heads = config["num_attention_heads"]
    assert reported_memory(info) == expected_memory(
        layers, config.get("num_key_value_heads", heads),
        config.get("head_dim", config["hidden_size"] // heads), q0,
        config["max_position_embeddings"], sum(t[3] for t in tensors),
        # Qwen2's window applies only with use_sliding_window (transformers' rule); with
        # global layers among the sliding ones (Gemma 3) the cache keeps every block.
        config.get("sliding_window") or 0
        if config.get("use_sliding_window", True) and
        "full_attention" not in config.get("layer_types", []) and
        "sliding_window_pattern" not in config else 0)
    for gguf_name in ("model.gguf", "model-q8_0.gguf"):
        check_gguf_groups_and_memory(switchyard, directory / gguf_name)


def test_real_model_groups_and_memory(switchyard):
    if not SMOLLM2_GGUF.exists():
        pytest.fail(f"{SMOLLM2_GGUF} is missing: run scripts/setup.sh")
    info = check_gguf_groups_and_memory(switchyard, SMOLLM2_GGUF)
    assert info["memory"]["kv_dtype"] == "F16"
    assert {g["group"]: list(g["dtypes"]) for g in info["tensor_groups"]}["ffn down"] == ["Q4_1"]
    check_gguf_groups_and_memory(switchyard, SMOLLM2_GGUF, "--max-model-len", "1000",
                                 tokens=1000)


def test_memory_estimate_is_what_the_engine_allocates(switchyard):
    """An engine given exactly the estimate's KV bytes holds exactly its blocks, and starts:
    they are as many as it requires for one sequence of max_model_len tokens. The copies of
    the matrices its backend lays out for MatMul (BF16 and Q8_0 ones where this CPU has the
    panel kernels; SmolLM2's tied Q8_0 embedding is its output head) take what the estimate
    says."""
    import requests
    from engine_server import EngineServer
    if not SMOLLM2_GGUF.exists():
        pytest.fail(f"{SMOLLM2_GGUF} is missing: run scripts/setup.sh")
    packed = {}
    for path in (MODELS_DIR / "tiny-llama3", MODELS_DIR / "tiny-llama3" / "model-q8_0.gguf",
                 SMOLLM2_GGUF):
        memory = json.loads(switchyard("model", "inspect", path, "--json",
                                       "--max-model-len", "200").stdout)["memory"]
        with EngineServer("--kv-cache-memory-bytes", memory["kv_cache_bytes"],
                          "--max-model-len", "200", model=path) as engine:
            metrics = requests.get(f"{engine.url}/metrics", timeout=10).text
            packed[path] = engine.sample("switchyard:startup_weights_bytes", loaded="packed")
        assert f'num_gpu_blocks="{memory["kv_blocks"]}"' in metrics, (path, memory)
        assert packed[path] == memory["packed_bytes"], path
    if "avx512_vnni" in pathlib.Path("/proc/cpuinfo").read_text():
        assert packed[SMOLLM2_GGUF] > 0


def test_max_model_len_beyond_the_context_is_refused(switchyard):
    proc = switchyard("model", "inspect", MODELS_DIR / "tiny-llama3", "--max-model-len", "4096",
                      check=False)
    assert proc.returncode == 2 and b"--max-model-len (4096)" in proc.stderr


def copy_without_template(source, target):
    """`source`'s HF files in `target`, with tokenizer_config.json's chat_template taken out;
    returns that template."""
    target.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (target / name).symlink_to(source / name)
    tokenizer_config = json.loads((source / "tokenizer_config.json").read_text())
    template = tokenizer_config.pop("chat_template")
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return template


def engine_chat_status(directory):
    import requests
    from engine_server import EngineServer
    with EngineServer(model=directory) as engine:
        return requests.post(f"{engine.url}/v1/chat/completions", timeout=60, json={
            "model": engine.name, "max_tokens": 1,
            "messages": [{"role": "user", "content": "hi"}]}).status_code


def test_chat_template_is_found_where_the_engine_finds_it(switchyard, tmp_path):
    """A template only in chat_template.json (transformers' own file for it) is present, as
    the engine, which serves chat with it, finds it; with no template anywhere both agree
    that there is none."""
    only_json = tmp_path / "only-json"
    template = copy_without_template(MODELS_DIR / "tiny-llama3", only_json)
    (only_json / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    assert inspect_json(switchyard, only_json)["chat_template"] is True
    assert b"chat template: present" in switchyard("model", "inspect", only_json).stdout
    assert engine_chat_status(only_json) == 200

    none = tmp_path / "none"
    copy_without_template(MODELS_DIR / "tiny-llama3", none)
    assert inspect_json(switchyard, none)["chat_template"] is False
    assert engine_chat_status(none) == 400


def test_unreadable_chat_template_file_is_an_error(switchyard, tmp_path):
    """The engine refuses to start on a chat_template.json it cannot read; inspect says why."""
    directory = tmp_path / "bad-template"
    copy_without_template(MODELS_DIR / "tiny-llama3", directory)
    (directory / "chat_template.json").write_text(json.dumps({"chat_template": 7}))
    proc = switchyard("model", "inspect", directory, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "chat_template.json" in err and "must be a string" in err, err
