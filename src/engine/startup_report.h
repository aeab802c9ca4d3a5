// The startup report: the three caches an engine starts from, named apart (issue 24) —
// the weights (file, bytes, mapped from the file or copied or converted, load time), the
// compiled steps (per token bucket: where it came from, time, graph digest; none: eager)
// and the KV cache (the pool, then its tiers). Logged once when the engine starts, served
// as JSON at GET /debug/startup, and set as metrics (EngineMetrics::SetStartup).
#pragma once

#include <string>

#include "engine/engine_core.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"

namespace switchyard::engine {

// {"weights": {...} | null, "compiled": {"mode": "compiled"|"eager", "buckets": [...]},
//  "kv_cache": {"dtype", "pool_bytes", "block_size", "tiers": [{"medium", "capacity_blocks",
//  "block_bytes"}...]}}; the pool is the first tier ("GPU", as vLLM names it).
std::string StartupReportJson(const RunnerStartup& startup, const RunnerLimits& limits,
                              const EngineSnapshot& snapshot);

// One log line per cache.
void LogStartupReport(const RunnerStartup& startup, const RunnerLimits& limits);

StartupNumbers StartupNumbersOf(const RunnerStartup& startup);

}  // namespace switchyard::engine
