#!/usr/bin/env python3
"""Writes tests/data/golden/block_hashes.json: prefix-caching block hashes computed the way
vLLM's `sha256_cbor` mode computes them (vllm/v1/core/kv_cache_utils.py: init_none_hash,
hash_block_tokens, generate_block_hash_extra_keys; vllm/utils/hashing.py: sha256_cbor).

Rules reproduced here:
  * sha256_cbor(x) = sha256(cbor2.dumps(x, canonical=True)).digest()
  * NONE_HASH = sha256_cbor(PYTHONHASHSEED string) when the seed is set, else os.urandom(32)
  * block hash = sha256_cbor((parent or NONE_HASH, tuple(block tokens), extra_keys))
  * extra_keys = tuple(lora name [every block] + cache_salt [block 0, when truthy]) or None
  * KV events publish int.from_bytes(hash, "big") & (2**64 - 1) by default.

Usage: .venv/bin/python tools/gen_block_hash_golden.py [--out PATH]
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import random

import cbor2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "golden", "block_hashes.json")


def sha256_cbor(value):
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def none_hash_for(seed, rng):
    if seed is None:
        # vLLM draws os.urandom(32); a seeded draw keeps this file reproducible.
        return bytes(rng.getrandbits(8) for _ in range(32))
    return sha256_cbor(seed)


def extra_keys_for(block_index, lora_name, cache_salt):
    keys = []
    if lora_name is not None:
        keys.append(lora_name)
    if block_index == 0 and cache_salt:
        keys.append(cache_salt)
    return tuple(keys) if keys else None


def chain_hashes(none_hash, tokens, block_size, lora_name, cache_salt):
    hashes = []
    parent = None
    for index in range(len(tokens) // block_size):
        block = tuple(tokens[index * block_size:(index + 1) * block_size])
        extra = extra_keys_for(index, lora_name, cache_salt)
        digest = sha256_cbor((parent if parent else none_hash, block, extra))
        hashes.append(digest)
        parent = digest
    return hashes


def make_cases():
    rng = random.Random(20240601)
    boundary = [0, 1, 23, 24, 255, 256, 65535, 65536, 2**31 - 1, 100, 128000, 151643]
    cases = [
        ("seed0_plain", "0", 16, list(range(64)), None, None),
        ("seed_other_header_widths", "12345", 16, boundary + [rng.randrange(0, 2**31) for _ in range(36)],
         None, None),
        ("seed_empty_string", "", 16, list(range(100, 132)), None, None),
        ("seed_unset_random_none_hash", None, 16, list(range(48)), None, None),
        ("lora_every_block", "0", 16, list(range(48)), "my-lora", None),
        ("salt_first_block_only", "0", 16, list(range(48)), None, "tenant-a"),
        ("lora_and_salt", "0", 16, list(range(48)), "adapter_x", "salt-123"),
        ("empty_salt_is_no_key", "0", 16, list(range(32)), None, ""),
        ("unicode_lora_long_salt", "7", 16, list(range(32)), "lora-\u00e9\u4e2d",
         "s" * 300),
        ("block_size_1", "0", 1, [5, 6, 7], None, None),
        ("block_size_32_array_header", "0", 32, [rng.randrange(0, 200000) for _ in range(96)], None,
         None),
        ("block_size_256_two_byte_array", "3", 256, [rng.randrange(0, 2**20) for _ in range(512)],
         None, None),
        ("partial_tail_not_hashed", "0", 16, list(range(40)), None, None),
        ("large_token_ids_int64", "0", 4,
         [2**32, 2**32 + 1, 2**40, 2**63 - 1, 4294967295, 4294967296, 0, 2**53 + 1], None, None),
        ("negative_token_ids", "0", 4, [-1, -24, -25, -256, -257, -65537, -2**31, -2**63], None,
         None),
    ]
    out = []
    for name, seed, block_size, tokens, lora_name, cache_salt in cases:
        none_hash = none_hash_for(seed, rng)
        hashes = chain_hashes(none_hash, tokens, block_size, lora_name, cache_salt)
        out.append({
            "name": name,
            "seed": seed,
            "none_hash": none_hash.hex(),
            "block_size": block_size,
            "tokens": tokens,
            "lora_name": lora_name,
            "cache_salt": cache_salt,
            "hashes": [h.hex() for h in hashes],
            "event_hashes": [int.from_bytes(h, "big") & ((1 << 64) - 1) for h in hashes],
        })
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    data = {
        "generator": "tools/gen_block_hash_golden.py",
        "cbor2_version": importlib.metadata.version("cbor2"),
        "cases": make_cases(),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(data['cases'])} cases to {args.out}")


if __name__ == "__main__":
    main()
