// KvTierStats: what /debug/kv, the startup log and the metrics show of one KV tier under
// the engine's pool. Plain value; totals since the tier started.
#pragma once

#include <cstdint>

#include "kvx/kv_events.h"

namespace switchyard::engine {

struct KvTierStats {
  // The medium as KV events name it ("CPU" for the host tier).
  const char* medium = kvx::kMediumCpu;
  int64_t capacity_blocks = 0;
  int64_t used_blocks = 0;
  int64_t block_bytes = 0;
  // Prompt tokens looked up in the tier (those past the pool's hit: every tier is asked for
  // them, so its hit rate is its share) and loaded from it.
  int64_t query_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t stored_blocks = 0;
  int64_t evicted_blocks = 0;
  // Bytes and seconds of finished copies, pool to tier (stores) and tier to pool (loads).
  int64_t store_bytes = 0;
  double store_seconds = 0;
  int64_t load_bytes = 0;
  double load_seconds = 0;
  // Loads by outcome (failed: the prompt was computed instead).
  int64_t loads_done = 0;
  int64_t loads_failed = 0;
};

}  // namespace switchyard::engine
