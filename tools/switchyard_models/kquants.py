"""Q4_K, Q5_K and Q6_K encoders in numpy, with llama.cpp's block layouts (ggml-common.h).

gguf-py (0.19) dequantises the K-quants but cannot quantise them, so these write the bytes
themselves. The scale search is the simple one (each sub-block's min/max, or its largest
magnitude, then the super-block scale from the largest sub-block scale), not llama.cpp's
iterative make_qkx2_quants/make_qx_quants: a little less accurate, the same layout, which is
what the engine's kernels and llama.cpp read. Rounding is to nearest, ties to even, as
llama.cpp's nearest_int.

Each function takes float32 rows whose length is a multiple of QK_K (256) and returns uint8
rows of (length / 256) blocks.
"""

import numpy as np

QK_K = 256
_K_SCALE_SIZE = 12


def _blocks(rows: np.ndarray) -> np.ndarray:
    if rows.shape[-1] % QK_K:
        raise ValueError(f"row length {rows.shape[-1]} is not a multiple of {QK_K}")
    return np.ascontiguousarray(rows, dtype=np.float32).reshape(-1, QK_K)


def _f16(x: np.ndarray) -> np.ndarray:
    """x rounded to float16 and back: the value the block stores and the reader sees."""
    return x.astype(np.float16).astype(np.float32)


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den == 0, 0.0, num / np.where(den == 0, 1.0, den)).astype(np.float32)


def _pack_scales_mins(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Eight 6-bit scales and eight 6-bit mins into 12 bytes (get_scale_min_k4's inverse):
    bytes 0-3 hold scales 0-3 and the top bits of scales 4-7, bytes 4-7 mins 0-3 and the top
    bits of mins 4-7, bytes 8-11 the low nibbles of scales 4-7 (low) and mins 4-7 (high)."""
    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    low = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    mid = m[:, :4] | ((m[:, 4:] >> 4) << 6)
    high = (sc[:, 4:] & 0x0F) | ((m[:, 4:] & 0x0F) << 4)
    return np.concatenate([low, mid, high], axis=1)


def _affine_k(blocks: np.ndarray, levels: int):
    """The shared part of Q4_K and Q5_K: 8 sub-blocks of 32, x ~ d*sc*q - dmin*m with
    q in [0, levels], sc and m 6-bit. Returns (d, dmin, sc, m, q) as stored."""
    sub = blocks.reshape(-1, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0.0)  # llama.cpp keeps the offset non-positive.
    hi = sub.max(axis=2)
    scale = (hi - lo) / levels
    mins = -lo
    d = _f16(scale.max(axis=1) / 63)
    dmin = _f16(mins.max(axis=1) / 63)
    sc = np.clip(np.rint(_safe_div(scale, d[:, None])), 0, 63)
    m = np.clip(np.rint(_safe_div(mins, dmin[:, None])), 0, 63)
    step = (d[:, None] * sc)[:, :, None]
    offset = (dmin[:, None] * m)[:, :, None]
    q = np.clip(np.rint(_safe_div(sub + offset, step)), 0, levels).astype(np.uint8)
    return d, dmin, sc, m, q.reshape(-1, QK_K)


def _nibbles(q: np.ndarray) -> np.ndarray:
    """Low nibbles of 256 values as Q4_K/Q5_K store them: per 64 values, byte l holds value l
    (low) and value l + 32 (high)."""
    q = (q & 0x0F).reshape(-1, 4, 2, 32)
    return (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, QK_K // 2)


def _half_bytes(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).view(np.uint8).reshape(-1, 2)


def quantize_q4_k(rows: np.ndarray) -> np.ndarray:
    """block_q4_K (144 bytes): d, dmin (f16), scales[12], qs[128]."""
    blocks = _blocks(rows)
    d, dmin, sc, m, q = _affine_k(blocks, 15)
    out = np.concatenate([_half_bytes(d), _half_bytes(dmin), _pack_scales_mins(sc, m),
                          _nibbles(q)], axis=1)
    return out.reshape(*rows.shape[:-1], -1)


def quantize_q5_k(rows: np.ndarray) -> np.ndarray:
    """block_q5_K (176 bytes): d, dmin (f16), scales[12], qh[32], qs[128]; bit k of qh[l] is
    the fifth bit of value 32*k + l."""
    blocks = _blocks(rows)
    d, dmin, sc, m, q = _affine_k(blocks, 31)
    high = (q.reshape(-1, 8, 32) >> 4).astype(np.uint8)
    qh = np.zeros((blocks.shape[0], 32), dtype=np.uint8)
    for k in range(8):
        qh |= high[:, k, :] << k
    out = np.concatenate([_half_bytes(d), _half_bytes(dmin), _pack_scales_mins(sc, m), qh,
                          _nibbles(q)], axis=1)
    return out.reshape(*rows.shape[:-1], -1)


def quantize_q6_k(rows: np.ndarray) -> np.ndarray:
    """block_q6_K (210 bytes): ql[128], qh[64], scales[16] (int8), d (f16); x ~ d*sc*(q-32)
    over 16 sub-blocks of 16. Per 128 values, ql byte l holds values l and l+64 (low
    nibbles), byte l+32 values l+32 and l+96; qh byte l their top two bits, 2 bits each."""
    blocks = _blocks(rows)
    sub = blocks.reshape(-1, 16, 16)
    # The largest magnitude maps to -32, so the full range [-32, 31] is used.
    peak = np.take_along_axis(sub, np.abs(sub).argmax(axis=2)[:, :, None], axis=2)[:, :, 0]
    scale = peak / -32
    peak_scale = np.take_along_axis(scale, np.abs(scale).argmax(axis=1)[:, None], axis=1)[:, 0]
    d = _f16(peak_scale / -128)
    sc = np.clip(np.rint(_safe_div(scale, d[:, None])), -128, 127)
    step = (d[:, None] * sc)[:, :, None]
    q = (np.clip(np.rint(_safe_div(sub, step)), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(-1, 2, 4, 32)  # halves of 128, quarters of 32
    ql = np.concatenate([(q[:, :, 0] & 0x0F) | ((q[:, :, 2] & 0x0F) << 4),
                         (q[:, :, 1] & 0x0F) | ((q[:, :, 3] & 0x0F) << 4)], axis=2)
    qh = ((q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4)
          | ((q[:, :, 3] >> 4) << 6))
    out = np.concatenate([ql.reshape(-1, QK_K // 2), qh.reshape(-1, QK_K // 4),
                          sc.astype(np.int8).view(np.uint8), _half_bytes(d)], axis=1)
    return out.reshape(*rows.shape[:-1], -1)
