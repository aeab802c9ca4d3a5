#!/usr/bin/env python3
"""Writes tests/data/golden/kv_events.json: msgpack payloads of KV event batches in the three
layouts vLLM's publisher has encoded them with (vllm/distributed/kv_events.py,
msgspec.msgpack.Encoder), for both block-hash forms.

Each payload is encoded twice and must agree byte for byte:
  1. through msgspec Structs declared as vLLM declares them, one set per layout
     (tests/e2e/vllm_kv_structs.py: "array" = early vLLM and llm-d-kv-cache's decoder,
     "map" = vLLM 0.32/0.33, "map_batch" = vLLM main);
  2. by hand with msgpack, from the rules those declarations imply:
       batch: [ts: float, events, dp_rank: int|None], or for "map_batch"
              {"ts": .., "events": [..], "data_parallel_rank": ..} without a None rank;
       events, tagged with the class name:
         array: ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
                 lora_id, medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
                 kv_cache_spec_sliding_window], ["BlockRemoved", block_hashes, medium,
                 group_idx], ["AllBlocksCleared"] (array_like keeps defaulted fields);
         map:   {"type": tag, field: value, ...} in declaration order, defaulted fields
                dropped while they hold their default (omit_defaults).
  Block hashes: int.from_bytes(digest, "big") & (2**64 - 1) by default, or the digest bytes.

Usage: .venv/bin/python tools/gen_kv_event_golden.py [--out PATH]  (needs msgspec)
"""

import argparse
import json
import os

import sys

import msgpack

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
from vllm_kv_structs import LAYOUTS, STRUCTS  # noqa: E402
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "golden", "kv_events.json")

# (name, required-or-default) in vLLM's declaration order, after the tag.
STORED_FIELDS = [
    ("block_hashes", False), ("parent_block_hash", False), ("token_ids", False),
    ("block_size", False), ("lora_id", False), ("medium", False), ("lora_name", False),
    ("extra_keys", True), ("group_idx", True), ("kv_cache_spec_kind", True),
    ("kv_cache_spec_sliding_window", True),
]
REMOVED_FIELDS = [("block_hashes", False), ("medium", False), ("group_idx", True)]
FIELDS = {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS, "AllBlocksCleared": []}


def digest(i):
    """Block hash i of the test cases; kv_event_codec_test.cc builds the same bytes."""
    return bytes((i * 37 + k * 11) & 0xFF for k in range(32))


def stored(hashes, parent, tokens, block_size, **optional):
    event = {"type": "BlockStored", "block_hashes": [digest(i) for i in hashes],
             "parent_block_hash": None if parent is None else digest(parent),
             "token_ids": tokens, "block_size": block_size}
    event.update(optional)
    return event


def removed(hashes, **optional):
    event = {"type": "BlockRemoved", "block_hashes": [digest(i) for i in hashes]}
    event.update(optional)
    return event


# Must match the cases built in tests/unit/kvx/kv_event_codec_test.cc.
CASES = {
    "stored_first_blocks": ([stored([1, 2], None, list(range(8)), 4, medium="GPU")],
                            1700000000.25, 0),
    "stored_chained_lora": ([stored([4], 3, [70000, 1, 200, 65536], 4, lora_id=3,
                                    medium="GPU", lora_name="adapter-a",
                                    extra_keys=[("adapter-a", "salt")], group_idx=0,
                                    kv_cache_spec_kind="full_attention",
                                    kv_cache_spec_sliding_window=4096)],
                            1764480000.123456, 1),
    "removed": ([removed([5, 6, 7], medium="GPU")], 1.5, 0),
    "removed_cpu_group": ([removed([8], medium="CPU", group_idx=2)], 2.0, None),
    "all_cleared": ([{"type": "AllBlocksCleared"}], 3.0, 0),
    "mixed": ([stored([9], None, [5, 6], 2, medium="GPU"), removed([9], medium="GPU"),
               {"type": "AllBlocksCleared"}], 1764480001.5, None),
}


def wire_hash(h, hash_form):
    return int.from_bytes(h, "big") & (2**64 - 1) if hash_form == "int" else h


def wire_value(name, value, hash_form):
    if name == "block_hashes":
        return [wire_hash(h, hash_form) for h in value]
    if name == "parent_block_hash" and value is not None:
        return wire_hash(value, hash_form)
    return value


def wire_event(event, layout, hash_form):
    tag = event["type"]
    if layout == "array":
        return [tag] + [wire_value(n, event.get(n), hash_form) for n, _ in FIELDS[tag]]
    out = {"type": tag}
    for name, has_default in FIELDS[tag]:
        if has_default and event.get(name) is None:
            continue
        out[name] = wire_value(name, event.get(name), hash_form)
    return out


def encode(events, ts, dp_rank, layout, hash_form):
    wire_events = [wire_event(e, layout, hash_form) for e in events]
    if layout == "map_batch":
        batch = {"ts": float(ts), "events": wire_events}
        if dp_rank is not None:
            batch["data_parallel_rank"] = dp_rank
    else:
        batch = [float(ts), wire_events, dp_rank]
    return msgpack.packb(batch, use_bin_type=True)


def encode_msgspec(events, ts, dp_rank, layout, hash_form):
    """The batch built from vLLM's Structs for `layout` and encoded as vLLM's publisher does."""
    structs = STRUCTS[layout]
    built = []
    for e in events:
        cls = getattr(structs, e["type"])
        built.append(cls(**{n: wire_value(n, e.get(n), hash_form) for n, _ in FIELDS[e["type"]]}))
    return structs.encoder.encode(structs.KVEventBatch(ts=float(ts), events=built,
                                                       data_parallel_rank=dp_rank))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    cases = []
    for name, (events, ts, dp_rank) in CASES.items():
        for layout in LAYOUTS:
            for hash_form in ("int", "bytes"):
                payload = encode_msgspec(events, ts, dp_rank, layout, hash_form)
                by_hand = encode(events, ts, dp_rank, layout, hash_form)
                assert payload == by_hand, (name, layout, hash_form, payload.hex(), by_hand.hex())
                cases.append({"name": name, "layout": layout, "hashes": hash_form,
                              "hex": payload.hex()})
    import msgspec
    doc = {"generator": "tools/gen_kv_event_golden.py",
           "msgspec": msgspec.__version__,
           "cases": cases}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out} (msgspec and msgpack agree)")


if __name__ == "__main__":
    main()
