// Compiled steps' flags, shared by `switchyard engine`, `switchyard generate` and (through
// RunnerFlags) `switchyard up`: vLLM's --enforce-eager and --compilation-config (parsed by
// compile::ParseCompilationConfig), and the compile cache's --compile-cache-dir (the host
// level; default $XDG_CACHE_HOME/switchyard/compile), --no-compile-cache, and
// --compile-cache-redis HOST:PORT with --compile-cache-redis-key-file (the cross-host
// level, off unless both are given). Main thread only.
#pragma once

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

#include "engine/llama_runner.h"

namespace switchyard::cli {

struct CompilationFlags {
  bool enforce_eager = false;
  std::string config;
  std::string cache_dir;
  bool no_cache = false;
  std::string cache_redis;
  std::string cache_redis_key_file;
};

void AddCompilationFlags(CLI::App* cmd, CompilationFlags* flags);

// Sets the runner's compile sizes and compile cache from the flags; InvalidArgument for a
// bad config, a Redis address without a key file (or the other way round).
absl::Status ApplyCompilationFlags(const CompilationFlags& flags, int64_t max_num_seqs,
                                   int64_t max_num_batched_tokens,
                                   engine::LlamaRunnerOptions* runner);

}  // namespace switchyard::cli
