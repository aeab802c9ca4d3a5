// The msgpack payload of a KV event batch, byte-for-byte as vLLM's msgspec encoder writes it
// (vllm/distributed/kv_events.py):
//
//   batch  = [ts: float64, [event...], data_parallel_rank: int | nil]
//   event  = kArray: ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
//                     lora_id, medium, lora_name, extra_keys, group_idx,
//                     kv_cache_spec_kind, kv_cache_spec_sliding_window]
//                    ["BlockRemoved", block_hashes, medium, group_idx]
//                    ["AllBlocksCleared"]
//                    every field present, nil when unset (msgspec's array_like structs do not
//                    drop defaults);
//            kMap:   {"type": "BlockStored", "block_hashes": .., ...} in the same field order,
//                    fields without a vLLM default always present (nil when unset), the
//                    defaulted ones (extra_keys, group_idx, kv_cache_spec_*) only when set.
//
// kArray is vLLM's layout until PR #42892 (2026-06), kMap after it. The decoder accepts both,
// plus the v0.9 two-element batch, shortened event arrays (missing trailing fields are unset)
// and longer ones or unknown map keys (ignored), as later and earlier vLLMs write them.
// Stateless functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "kvx/kv_events.h"

namespace switchyard::kvx {

enum class EventLayout { kArray, kMap };
enum class HashForm {
  kInt,    // EventHash::AsUint64() (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, vLLM's default)
  kBytes,  // the digest bytes as msgpack bin (=0); integer hashes stay integers
};

struct KvEventEncoding {
  EventLayout layout = EventLayout::kMap;  // current vLLM
  HashForm hashes = HashForm::kInt;
};

// REQUIRES: every extra_keys_msgpack holds exactly one well-formed msgpack value.
std::string EncodeKvEventBatch(const KvEventBatch& batch, const KvEventEncoding& encoding);

// Decodes untrusted bytes. Errors name the offending element, e.g.
// "KV event batch: events[1] (BlockStored).token_ids[3]: expected an int32, got str".
absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view bytes);

}  // namespace switchyard::kvx
