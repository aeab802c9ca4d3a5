"""vLLM's KV-event msgspec structs (vllm/distributed/kv_events.py), declared anew for each of
the three wire layouts, so that tests encode and strictly decode exactly the bytes vLLM does.

The declarations follow vLLM's source; only the struct options and field lists change:

  "array":     EventBatch and KVCacheEvent both array_like. Early vLLM (v0.9 declared both
               array_like) with the fields as llm-d-kv-cache's Go decoder reads them by
               position (tag, 11 BlockStored fields, 3 BlockRemoved fields).
  "map":       EventBatch array_like, KVCacheEvent not: vLLM 0.32.0 as released on PyPI
               (its BlockStored also has locality, ownership and session_id, BlockRemoved
               locality and ownership, all None by default and so never on the wire here).
               vLLM 0.33.0 is the same but for one byte-level detail: its BlockStored gained
               lookahead_token_ids, and with 16 fields msgspec writes every BlockStored map
               header in the 3-byte map16 form (de 00 NN) where 0.32 writes a fixmap (8N).
  "map_batch": neither array_like: vLLM's main branch at commit 0181ea3.

Every struct has omit_defaults=True and gc=False as in vLLM; msgspec drops a defaulted field
from a map struct when it holds its default, and never drops one from an array_like struct.
Block hashes are ExternalBlockHash = bytes | int.
"""
from types import SimpleNamespace
from typing import Any

import msgspec

LAYOUTS = ("array", "map", "map_batch")

Hash = bytes | int


def declare(layout):
    """The structs of one layout: EventBatch, KVEventBatch, BlockStored, BlockRemoved,
    AllBlocksCleared (fresh classes, so that each layout has its own tagged union)."""
    assert layout in LAYOUTS, layout
    events_array_like = layout == "array"
    batch_array_like = layout != "map_batch"
    released = layout == "map"  # vLLM 0.32/0.33 carry the offloading fields

    class EventBatch(msgspec.Struct, array_like=batch_array_like, omit_defaults=True,
                     gc=False):
        ts: float
        events: list[Any]
        data_parallel_rank: int | None = None

    class KVCacheEvent(msgspec.Struct, array_like=events_array_like, omit_defaults=True,
                       gc=False, tag=True):
        pass

    class BlockStored(KVCacheEvent):
        block_hashes: list[Hash]
        parent_block_hash: Hash | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None
        lora_name: str | None
        extra_keys: list[tuple[Any, ...] | None] | None = None
        group_idx: int | None = None
        kv_cache_spec_kind: str | None = None
        kv_cache_spec_sliding_window: int | None = None
        if released:
            locality: str | None = None
            ownership: str | None = None
            session_id: str | None = None

    class BlockRemoved(KVCacheEvent):
        block_hashes: list[Hash]
        medium: str | None
        group_idx: int | None = None
        if released:
            locality: str | None = None
            ownership: str | None = None

    class AllBlocksCleared(KVCacheEvent):
        pass

    class KVEventBatch(EventBatch):
        events: list[BlockStored | BlockRemoved | AllBlocksCleared]

    return SimpleNamespace(EventBatch=EventBatch, KVEventBatch=KVEventBatch,
                           BlockStored=BlockStored, BlockRemoved=BlockRemoved,
                           AllBlocksCleared=AllBlocksCleared,
                           decoder=msgspec.msgpack.Decoder(KVEventBatch),
                           encoder=msgspec.msgpack.Encoder())


STRUCTS = {layout: declare(layout) for layout in LAYOUTS}
