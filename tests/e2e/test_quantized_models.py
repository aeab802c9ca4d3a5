"""The quantized GGUF writers (tools/switchyard_models/quant_types.py, kquants.py).

Every encoder is decoded by gguf-py's `gguf.quants.dequantize`, an implementation of
llama.cpp's dequantisation independent of ours: a byte in the wrong place of a block (a
swapped nibble half, a mispacked 6-bit scale) decodes to values far from the input. Each
generated file's tensors are decoded the same way against the seeded weights, and llama.cpp
itself (llama-cpp-python) loads every tiny model in every type and gives logits near its own
on the F32 file.
"""
import pathlib
import subprocess
import sys

import gguf
import numpy as np
import pytest

# Needs llama-cpp-python: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

from switchyard_models import families, gguf_export, quant_types, weights  # noqa: E402

T = gguf.GGMLQuantizationType
QUANT_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"]
TINY = ["tiny-llama3", "tiny-qwen2", "tiny-mistral", "tiny-llama3-256"]

# Relative RMS error of encode-then-decode on Gaussian rows, about 1.2x what each encoder
# gives (measured: Q4_0 0.087, Q4_1 0.078, Q5_0 0.043, Q5_1 0.038, Q4_K 0.078, Q5_K 0.038,
# Q6_K 0.019, Q8_0 0.0054). A misplaced byte or bit gives errors near 1.
RMS_BOUND = {T.Q4_0: 0.105, T.Q4_1: 0.095, T.Q5_0: 0.052, T.Q5_1: 0.046, T.Q4_K: 0.095,
             T.Q5_K: 0.046, T.Q6_K: 0.023, T.Q8_0: 0.0065}


def _rows(rng):
    x = (rng.standard_normal((48, 512)) * 0.02).astype(np.float32)
    x[1] = 0.0  # all-zero blocks: scales of zero must decode to zeros, not NaN
    x[2, :256] = np.abs(x[2, :256])  # positive-only block: min offset 0
    x[3, :256] = -np.abs(x[3, :256])  # negative-only block
    x[4, 256:] = 0.0
    x[4, 300] = 1.0  # one outlier: its sub-block's scale dominates the block's
    x[5] = np.linspace(-0.05, 0.05, 512, dtype=np.float32)  # every position distinct
    return x


@pytest.mark.parametrize("qtype", list(RMS_BOUND), ids=lambda t: t.name)
def test_encoders_decode_with_gguf_dequantize(qtype):
    x = _rows(np.random.default_rng(7))
    raw = quant_types.encode(x, qtype)
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    assert raw.dtype == np.uint8 and raw.shape == (48, 512 // block * type_size)
    assert quant_types.encoded_layout(x.shape, qtype) == (raw.shape, raw.dtype, raw.nbytes)
    y = gguf.quants.dequantize(raw, qtype)
    assert y.shape == x.shape and np.isfinite(y).all()
    rms = np.sqrt(((y - x) ** 2).mean() / (x ** 2).mean())
    assert rms <= RMS_BOUND[qtype], f"relative RMS error {rms:.4f}"
    assert (y[1] == 0).all()
    assert (y[2, :256] >= -1e-6).all() and (y[3, :256] <= 1e-6).all()
    assert y[4, 300] == pytest.approx(1.0, rel=0.02)
    # Position by position, not only on average: a permutation inside a block shows here.
    ramp_err = np.abs(y[5] - x[5]).max()
    assert ramp_err <= 0.1 * 0.05 if qtype != T.Q8_0 else ramp_err <= 1e-3


def test_k_quant_encoders_reject_short_rows():
    with pytest.raises(ValueError):
        quant_types.encode(np.zeros((2, 64), np.float32), T.Q4_K)


@pytest.mark.parametrize("file_type,cols,expected", [
    ("Q4_K", 256, T.Q4_K), ("Q4_K", 576, T.Q5_0), ("Q5_K", 64, T.Q5_1), ("Q6_K", 64, T.Q8_0),
    ("Q4_K", 48, T.F16),  # 48 is not a multiple of Q5_0's 32 either
    ("Q4_0", 64, T.Q4_0), ("Q8_0", 64, T.Q8_0), ("F32", 64, T.F32), ("BF16", 64, T.BF16),
])
def test_k_quant_fallback_follows_llama_quantize(file_type, cols, expected):
    assert quant_types.tensor_type("blk.0.attn_q.weight", (8, cols), file_type, 2,
                                   False) == expected


@pytest.mark.parametrize("file_type,cols,expected", [
    ("Q4_1", 576, T.Q8_0),  # the real SmolLM2-135M-Instruct.Q4_1.gguf's token_embd
    ("Q4_0", 256, T.Q6_K), ("Q4_K_M", 2048, T.Q6_K), ("Q8_0", 256, T.Q8_0), ("F32", 256, T.F32),
])
def test_output_projection_type(file_type, cols, expected):
    for name, tied in (("output.weight", False), ("token_embd.weight", True)):
        assert quant_types.tensor_type(name, (100, cols), file_type, 30, tied) == expected
    if file_type.startswith("Q4"):
        base = quant_types.FILE_TYPES[file_type][1]
        got = quant_types.tensor_type("token_embd.weight", (100, 2048), file_type, 30, False)
        assert got == base  # untied embeddings keep the file's type


def test_q4_k_m_bumps_attn_v_and_ffn_down_as_llama_quantize():
    # llama.cpp's use_more_bits for 30 layers (SmolLM2-135M): 0-2, 5, 8, ..., 26-29.
    more = [i for i in range(30) if quant_types.use_more_bits(i, 30)]
    assert more == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]
    for i in range(30):
        for name in (f"blk.{i}.attn_v.weight", f"blk.{i}.ffn_down.weight"):
            want = T.Q6_K if i in more else T.Q4_K
            assert quant_types.tensor_type(name, (64, 1536), "Q4_K_M", 30, True) == want
        assert quant_types.tensor_type(f"blk.{i}.attn_q.weight", (64, 1536), "Q4_K_M", 30,
                                       True) == T.Q4_K


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("quantized")
    for only in ("tiny", "tiny-256"):
        subprocess.run([sys.executable, str(REPO / "tools/gen_models.py"), "--out", str(out),
                        "--only", only, "--types", ",".join(["F32", *QUANT_TYPES])],
                       check=True, capture_output=True)
    return out


def _plans():
    plans = families.tiny_plans(0) + families.tiny_256_plans(0)
    return {p.name: p for p in plans}


@pytest.mark.parametrize("model", TINY)
@pytest.mark.parametrize("file_type", QUANT_TYPES)
def test_generated_tensors_decode_to_the_seeded_weights(generated, model, file_type):
    plan = _plans()[model]
    config = plan.config
    reader = gguf.GGUFReader(str(generated / model / f"model-{file_type.lower()}.gguf"))
    assert reader.fields["general.file_type"].contents() == quant_types.FILE_TYPES[file_type][0]
    tensors = {t.name: t for t in reader.tensors}
    seen = set()
    for spec in weights.tensor_specs(config):
        name = gguf_export.gguf_tensor_name(spec.name)
        t = tensors[name]
        want_type = quant_types.tensor_type(name, spec.shape, file_type,
                                            config["num_hidden_layers"],
                                            config["tie_word_embeddings"])
        assert t.tensor_type == want_type, name
        seen.add(want_type)
        got = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(spec.shape)
        values = weights.make_tensor(spec, 0)
        if config["model_type"] != "qwen2" and spec.name.endswith(("q_proj.weight",
                                                                   "k_proj.weight")):
            heads = config["num_attention_heads" if "q_proj" in spec.name
                           else "num_key_value_heads"]
            values = gguf_export.permute_for_llama_rope(values, heads)
        if want_type == T.F32:
            np.testing.assert_array_equal(got, values)
            continue
        rms = np.sqrt(((got - values) ** 2).mean() / (values ** 2).mean())
        assert rms <= RMS_BOUND.get(want_type, 1e-3), f"{name} ({want_type.name}): {rms:.4f}"
    base = quant_types.FILE_TYPES[file_type][1]
    if model == "tiny-llama3-256":
        assert base in seen  # hidden 256: the K-quants are really there
    if file_type == "Q4_K_M" and model == "tiny-llama3-256":
        assert T.Q6_K in seen


def _llamacpp_logits(path, ids):
    try:
        from llama_cpp import Llama
    except ImportError:
        pytest.fail("llama-cpp-python is not installed in this Python: run scripts/setup.sh "
                    "(tools/requirements-fleet.txt)")
    llm = Llama(model_path=str(path), n_ctx=256, n_batch=256, logits_all=True, verbose=False,
                n_threads=2, seed=0)
    llm.eval(ids)
    return np.array(llm.scores[:len(ids)], dtype=np.float32)


# llama.cpp's logits on each quantized file against its own on the F32 file, max |diff| over
# 41 positions, as a fraction of the largest F32 logit, and the correlation of all logits.
# Observed over tiny-llama3, -qwen2, -mistral and -llama3-256: Q4_* <= 0.244 (correlation
# >= 0.975), Q5_* <= 0.121 (>= 0.993), Q6_K <= 0.061 (>= 0.998); tiny-qwen3-moe Q4_0 0.186.
# Loose on purpose: this checks that llama.cpp reads what we wrote (gguf-py's decode above
# checks the bytes closely); a misread block gives differences of the order of the logits
# themselves and little correlation.
LOGIT_BOUND = {"Q4": (0.35, 0.95), "Q5": (0.2, 0.98), "Q6": (0.12, 0.99)}


# tiny-gemma3 is left out: its sqrt(hidden)-scaled embeddings amplify 4-bit error past these
# bounds (Q4_0: 0.43 of the largest logit, correlation 0.943), though llama.cpp loads it.
@pytest.mark.parametrize("model", TINY + ["tiny-qwen3", "tiny-qwen3-moe"])
def test_llamacpp_loads_every_type(generated, model):
    ids = [5 + (7 * i) % 900 for i in range(41)]
    ref = _llamacpp_logits(generated / model / "model-f32.gguf", ids)
    scale = np.abs(ref).max()
    for file_type in QUANT_TYPES:
        got = _llamacpp_logits(generated / model / f"model-{file_type.lower()}.gguf", ids)
        assert np.isfinite(got).all()
        max_rel, min_corr = LOGIT_BOUND[file_type[:2]]
        rel = np.abs(got - ref).max() / scale
        assert rel <= max_rel, f"{file_type}: {rel:.3f}"
        corr = np.corrcoef(got.ravel(), ref.ravel())[0, 1]
        assert corr >= min_corr, f"{file_type}: logits correlate {corr:.3f} with F32's"
