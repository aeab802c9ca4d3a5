"""vLLM's KV-event wire format as a consumer sees it: sha256_cbor block hashes (as vLLM computes
them with PYTHONHASHSEED set), their two wire forms, and the array/map event layouts."""
import hashlib

import cbor2

END_SEQ = b"\xff" * 8  # sequence number of the replay socket's end-of-replay frame

MAP_FIELDS = {
    "BlockStored": ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                    "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
                    "kv_cache_spec_sliding_window"],
    "BlockRemoved": ["block_hashes", "medium", "group_idx"],
    "AllBlocksCleared": [],
}


def sha256_cbor(value):
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def vllm_block_hashes(tokens, block_size, seed="0", parent=None):
    """vLLM's chained sha256_cbor hashes of the full blocks of `tokens`; the chain starts at
    `parent`, or at NONE_HASH = sha256_cbor(seed) (PYTHONHASHSEED set)."""
    parent = parent or sha256_cbor(seed)
    hashes = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = sha256_cbor((parent, tuple(tokens[start:start + block_size]), None))
        hashes.append(parent)
    return hashes


def wire_hash(digest, form):
    """A block hash as it appears on the wire: 64-bit int (low bytes) or the raw digest."""
    return int.from_bytes(digest, "big") & (2**64 - 1) if form == "int" else digest


def as_dict(event, layout=None):
    """Normalizes an event to the map form {"type": tag, field: value}. With `layout` given
    ("map" or "array"), also checks the event has that layout; array events carry every field
    (nil when unset)."""
    if isinstance(event, dict):
        assert layout in (None, "map"), event
        return event
    assert layout in (None, "array") and isinstance(event, list), event
    names = MAP_FIELDS[event[0]]
    assert len(event) == len(names) + 1, event
    return {"type": event[0], **dict(zip(names, event[1:]))}
