// The model runner behind an engine, from flags: the CPU runner over the checkpoint
// (`--backend cpu`) or the simulated one (`--backend sim`, sim/). Shared by `switchyard
// engine` and `switchyard up`.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cli/compilation_flags.h"

#include "engine/engine_server.h"

namespace switchyard::cli {

struct RunnerFlags {
  std::string backend = "cpu";
  // Parsed by model::ParseDeviceDType (cpu backend only).
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";
  size_t threads = 0;
  int32_t block_size = 16;
  int32_t max_num_seqs = 128;
  int32_t max_num_batched_tokens = 2048;
  int64_t kv_cache_memory_bytes = int64_t{1} << 30;
  int32_t num_gpu_blocks_override = 0;
  std::string sim_latency;
  // Sim backend: hold real KV bytes of the model's size (sim/sim_kv_memory.h) so that KV
  // transfers move them; the cache then has --num-gpu-blocks-override blocks, or as many as
  // kv_cache_memory_bytes holds.
  bool sim_kv_memory = false;
  // cpu backend: compiled steps and their cache (compilation_flags.h).
  CompilationFlags compilation;
};

// InvalidArgument for an unknown backend or dtype, a bad --sim-latency or
// --compilation-config.
absl::StatusOr<engine::RunnerFactory> MakeRunnerFactory(const RunnerFlags& f);

}  // namespace switchyard::cli
