"""Which GGML type each tensor of a generated GGUF gets, and its bytes.

The choice follows llama.cpp's llama-quantize (src/llama-quant.cpp, llama_tensor_get_type)
for the file types written here, so a generated file has the mix a downloaded one has:

- 1-D tensors (norms, biases), rope_freqs and the MoE router (ffn_gate_inp) stay F32 in
  every file type.
- F32, BF16: every 2-D tensor in that type.
- Quantized types: every 2-D tensor in the file's base type, except the output projection
  (or, with tied embeddings, token_embd, which doubles as it): Q6_K, or Q8_0 when its rows
  are not a multiple of the base type's block, or when the base type is Q8_0 itself. This
  is why the real SmolLM2-135M-Instruct Q4_1 file has token_embd in Q8_0 (576 columns).
- Q4_K_M: Q4_K, with attn_v and ffn_down (a MoE layer's stacked ffn_down_exps too) in
  Q6_K in the layers use_more_bits picks (the first and last eighth, and every third layer
  between).
- K-quants need rows that are a multiple of 256; other rows fall back as llama-quantize's
  convert_incompatible_tensor does: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and F16 if
  even that block does not divide the row. The tiny models (hidden 64) therefore carry no
  K-quant tensor at all; tiny-llama3-256 (families.tiny_256_plans) does.

File types Q4_K and Q5_K are llama.cpp's Q4_K_S and Q5_K_S without their per-layer bumps
(so that a file exercises one K-quant type wherever the shape allows); Q6_K is llama.cpp's.
"""

import gguf
import numpy as np

from . import kquants, weights

T = gguf.GGMLQuantizationType
F = gguf.LlamaFileType

# File type name -> (general.file_type, base tensor type).
FILE_TYPES = {
    "F32": (F.ALL_F32, T.F32),
    "BF16": (F.MOSTLY_BF16, T.BF16),
    "Q8_0": (F.MOSTLY_Q8_0, T.Q8_0),
    "Q4_0": (F.MOSTLY_Q4_0, T.Q4_0),
    "Q4_1": (F.MOSTLY_Q4_1, T.Q4_1),
    "Q5_0": (F.MOSTLY_Q5_0, T.Q5_0),
    "Q5_1": (F.MOSTLY_Q5_1, T.Q5_1),
    "Q4_K": (F.MOSTLY_Q4_K_S, T.Q4_K),
    "Q5_K": (F.MOSTLY_Q5_K_S, T.Q5_K),
    "Q6_K": (F.MOSTLY_Q6_K, T.Q6_K),
    "Q4_K_M": (F.MOSTLY_Q4_K_M, T.Q4_K),
}

_K_FALLBACK = {T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}

_K_ENCODERS = {T.Q4_K: kquants.quantize_q4_k, T.Q5_K: kquants.quantize_q5_k,
               T.Q6_K: kquants.quantize_q6_k}


def _block(qtype) -> int:
    return gguf.GGML_QUANT_SIZES[qtype][0]


def use_more_bits(layer: int, num_layers: int) -> bool:
    """llama.cpp's choice of the layers whose attn_v / ffn_down get more bits in *_K_M."""
    return (layer < num_layers // 8 or layer >= 7 * num_layers // 8
            or (layer - num_layers // 8) % 3 == 2)


def tensor_type(name: str, shape: tuple[int, ...], file_type: str, num_layers: int,
                tied: bool):
    """The GGML type of GGUF tensor `name` (llama.cpp names, numpy shape) in `file_type`."""
    base = FILE_TYPES[file_type][1]
    if len(shape) == 1 or name.endswith("ffn_gate_inp.weight"):
        return T.F32
    if base in (T.F32, T.BF16):
        return base
    cols = shape[-1]
    qtype = base
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        qtype = T.Q8_0 if cols % _block(base) or base == T.Q8_0 else T.Q6_K
    elif file_type == "Q4_K_M" and ("attn_v.weight" in name or ".ffn_down" in name):
        if use_more_bits(int(name.split(".")[1]), num_layers):
            qtype = T.Q6_K
    if cols % _block(qtype):
        qtype = _K_FALLBACK.get(qtype, T.F16)
        if cols % _block(qtype):
            qtype = T.F16
    return qtype


def encoded_layout(shape: tuple[int, ...], qtype) -> tuple[tuple[int, ...], np.dtype, int]:
    """(array shape, array dtype, nbytes) that encode() produces, without computing it."""
    n = int(np.prod(shape))
    if qtype == T.F32:
        return shape, np.dtype(np.float32), n * 4
    if qtype == T.F16:
        return shape, np.dtype(np.float16), n * 2
    if qtype == T.BF16:
        return (*shape[:-1], shape[-1] * 2), np.dtype(np.uint8), n * 2
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    row_bytes = shape[-1] // block * type_size
    return (*shape[:-1], row_bytes), np.dtype(np.uint8), int(np.prod(shape[:-1])) * row_bytes


def encode(values: np.ndarray, qtype) -> np.ndarray:
    """The tensor's bytes (or float array) in `qtype`, as written to the file."""
    if qtype == T.F32:
        return np.ascontiguousarray(values, dtype=np.float32)
    if qtype == T.F16:
        return np.ascontiguousarray(values, dtype=np.float16)
    if qtype == T.BF16:
        raw = weights.round_to_bf16(values)
        return raw.view(np.uint8).reshape(*raw.shape[:-1], raw.shape[-1] * 2)
    if qtype in _K_ENCODERS:
        return _K_ENCODERS[qtype](values)
    return gguf.quants.quantize(values, qtype)
