// The msgpack payload of a KV event batch, byte-for-byte as vLLM's msgspec encoder writes it
// (vllm/distributed/kv_events.py). Three layouts are in use, named by "event_layout":
//
//   "array":     batch  = [ts: float64, [event...], data_parallel_rank: int | nil]
//                event  = ["BlockStored", block_hashes, parent_block_hash, token_ids,
//                          block_size, lora_id, medium, lora_name, extra_keys, group_idx,
//                          kv_cache_spec_kind, kv_cache_spec_sliding_window]
//                         ["BlockRemoved", block_hashes, medium, group_idx]
//                         ["AllBlocksCleared"]
//                every field present, nil when unset (msgspec's array_like structs do not
//                drop defaults). Early vLLM (both structs array_like); what llm-d-kv-cache's
//                Go decoder reads (it decodes the batch and every event as arrays).
//   "map":       the same batch array, events as tagged maps {"type": "BlockStored",
//                "block_hashes": .., ...} in the same field order: fields without a vLLM
//                default always present (nil when unset), the defaulted ones (extra_keys,
//                group_idx, kv_cache_spec_*) only when set. vLLM 0.32 and 0.33 (EventBatch
//                array_like, KVCacheEvent not).
//   "map_batch": the events as in "map", the batch a map too: {"ts": .., "events": [..],
//                "data_parallel_rank": ..}, the rank only when set. vLLM's main branch
//                after EventBatch dropped array_like.
//
// The decoder accepts all three (it tells them apart by the msgpack types), plus the v0.9
// two-element batch, shortened event arrays (missing trailing fields are unset) and longer
// ones or unknown map keys (ignored), as later and earlier vLLMs write them.
// Stateless functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "kvx/kv_events.h"

namespace switchyard::kvx {

enum class EventLayout { kArray, kMap, kMapBatch };
enum class HashForm {
  kInt,    // EventHash::AsUint64() (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, vLLM's default)
  kBytes,  // the digest bytes as msgpack bin (=0); integer hashes stay integers
};

struct KvEventEncoding {
  EventLayout layout = EventLayout::kMap;  // vLLM's latest release
  HashForm hashes = HashForm::kInt;
};

// The layout's "event_layout" name, and back; InvalidArgument listing the names otherwise.
std::string_view EventLayoutName(EventLayout layout);
absl::StatusOr<EventLayout> ParseEventLayout(std::string_view name);

// REQUIRES: every extra_keys_msgpack holds exactly one well-formed msgpack value.
std::string EncodeKvEventBatch(const KvEventBatch& batch, const KvEventEncoding& encoding);

// Decodes untrusted bytes. Errors name the offending element, e.g.
// "KV event batch: events[1] (BlockStored).token_ids[3]: expected an int32, got str".
absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view bytes);

}  // namespace switchyard::kvx
