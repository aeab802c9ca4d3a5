#!/usr/bin/env python3
"""Writes tests/data/golden/kv_events.json: msgpack payloads of KV event batches laid out the
way vLLM's publisher encodes them (vllm/distributed/kv_events.py, msgspec.msgpack.Encoder).

vLLM's structs, reproduced here as plain msgpack values:
  EventBatch(array_like=True, omit_defaults=True): [ts: float, events: list, dp_rank: int|None]
  KVCacheEvent(tag=True, ...): the tag is the class name.
    array layout (array_like=True; msgspec keeps default-valued fields in arrays):
      ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
       medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
       kv_cache_spec_sliding_window]
      ["BlockRemoved", block_hashes, medium, group_idx]
      ["AllBlocksCleared"]
    map layout (vLLM PR #42892; omit_defaults drops the fields that have a default when
      they hold it): {"type": tag, field: value, ...} in declaration order.
  Block hashes: int.from_bytes(digest, "big") & (2**64 - 1) by default, or the digest bytes.

When msgspec is importable, the same batches are also encoded through msgspec Structs declared
like vLLM's, and both encodings must agree byte for byte.

Usage: .venv/bin/python tools/gen_kv_event_golden.py [--out PATH]
"""

import argparse
import json
import os

import msgpack

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    batch = [float(ts), [wire_event(e, layout, hash_form) for e in events], dp_rank]
    return msgpack.packb(batch, use_bin_type=True)


def msgspec_encoder():
    """vLLM's declarations (both layouts), or None without msgspec."""
    try:
        import msgspec
    except ImportError:
        return None
    Hash = bytes | int

    def declare(array_like):
        class Event(msgspec.Struct, array_like=array_like, omit_defaults=True, gc=False,
                    tag=True):
            pass

        class BlockStored(Event):
            block_hashes: list[Hash]
            parent_block_hash: Hash | None
            token_ids: list[int]
            block_size: int
            lora_id: int | None
            medium: str | None
            lora_name: str | None
            extra_keys: list[tuple | None] | None = None
            group_idx: int | None = None
            kv_cache_spec_kind: str | None = None
            kv_cache_spec_sliding_window: int | None = None

        class BlockRemoved(Event):
            block_hashes: list[Hash]
            medium: str | None
            group_idx: int | None = None

        class AllBlocksCleared(Event):
            pass

        return {"BlockStored": BlockStored, "BlockRemoved": BlockRemoved,
                "AllBlocksCleared": AllBlocksCleared}

    class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
        ts: float
        events: list
        data_parallel_rank: int | None = None

    classes = {"array": declare(True), "map": declare(False)}
    encoder = msgspec.msgpack.Encoder()

    def encode_msgspec(events, ts, dp_rank, layout, hash_form):
        structs = []
        for e in events:
            cls = classes[layout][e["type"]]
            kwargs = {n: wire_value(n, e.get(n), hash_form) for n, _ in FIELDS[e["type"]]}
            structs.append(cls(**kwargs))
        return encoder.encode(EventBatch(ts=float(ts), events=structs,
                                         data_parallel_rank=dp_rank))

    return encode_msgspec


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    cross_check = msgspec_encoder()
    cases = []
    for name, (events, ts, dp_rank) in CASES.items():
        for layout in ("array", "map"):
            for hash_form in ("int", "bytes"):
                payload = encode(events, ts, dp_rank, layout, hash_form)
                if cross_check is not None:
                    expected = cross_check(events, ts, dp_rank, layout, hash_form)
                    assert payload == expected, (name, layout, hash_form, payload.hex(),
                                                 expected.hex())
                cases.append({"name": name, "layout": layout, "hashes": hash_form,
                              "hex": payload.hex()})
    doc = {"generator": "tools/gen_kv_event_golden.py",
           "msgpack": msgpack.version and ".".join(map(str, msgpack.version)),
           "checked_against_msgspec": cross_check is not None,
           "cases": cases}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out}"
          + (" (cross-checked with msgspec)" if cross_check else ""))


if __name__ == "__main__":
    main()
