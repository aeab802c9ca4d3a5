#!/usr/bin/env python3
"""Writes the seed corpora of the safetensors and GGUF fuzz targets.

Small valid files made with the reference Python writers (safetensors, gguf), plus
truncated and corrupted copies, into tests/fuzz/{safetensors,gguf}_corpus/.
Run from the repository root: .venv/bin/python tools/make_model_fuzz_corpus.py
"""
import os
import struct
import tempfile

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
from gguf.quants import quantize
from safetensors.numpy import save

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def variants(folder, stem, data):
    write(folder, f"{stem}", data)
    for cut in (4, 9, len(data) // 2, len(data) - 1):
        write(folder, f"{stem}_cut{cut}", data[:cut])
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF
    write(folder, f"{stem}_flip", bytes(flipped))


def safetensors_corpus(rng):
    folder = os.path.join(ROOT, "tests/fuzz/safetensors_corpus")
    tensors = {
        "w": rng.standard_normal((4, 3)).astype(np.float32),
        "h": rng.standard_normal((5,)).astype(np.float16),
        "i": np.arange(3, dtype=np.int32),
    }
    variants(folder, "three_tensors", save(tensors, metadata={"format": "pt"}))
    variants(folder, "empty", save({}))
    header = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' \
             b'"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
    write(folder, "overlap", struct.pack("<Q", len(header)) + header + bytes(12))


def gguf_bytes(build):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.gguf")
        writer = GGUFWriter(path, "llama")
        build(writer)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with open(path, "rb") as f:
            return f.read()


def gguf_corpus(rng):
    folder = os.path.join(ROOT, "tests/fuzz/gguf_corpus")

    def small_model(w):
        w.add_uint32("llama.embedding_length", 32)
        w.add_uint32("llama.block_count", 1)
        w.add_uint32("llama.feed_forward_length", 64)
        w.add_uint32("llama.attention.head_count", 4)
        w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
        w.add_array("tokenizer.ggml.tokens", ["a", "b", "c", "d"])
        w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.0, -3.0])
        w.add_bool("tokenizer.ggml.add_bos_token", True)
        w.add_tensor("token_embd.weight", rng.standard_normal((4, 32)).astype(np.float32))
        q = rng.standard_normal((2, 32)).astype(np.float32)
        w.add_tensor("q8", quantize(q, GGMLQuantizationType.Q8_0),
                     raw_dtype=GGMLQuantizationType.Q8_0)
        w.add_tensor("q4", quantize(q, GGMLQuantizationType.Q4_0),
                     raw_dtype=GGMLQuantizationType.Q4_0)

    variants(folder, "small_model", gguf_bytes(small_model))
    variants(folder, "metadata_only", gguf_bytes(lambda w: w.add_string("general.name", "x")))


def main():
    rng = np.random.default_rng(0)
    safetensors_corpus(rng)
    gguf_corpus(rng)


if __name__ == "__main__":
    main()
