#include "cli/compilation_flags.h"

#include <cstdio>
#include <memory>

#include "cli/terminal_progress.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "compile/compilation_config.h"
#include "compile/redis_cache.h"

namespace switchyard::cli {

void AddCompilationFlags(CLI::App* cmd, CompilationFlags* f) {
  cmd->add_flag("--enforce-eager", f->enforce_eager,
                "run every step op by op, whatever --compilation-config says (eager is the "
                "default today)");
  cmd->add_option("--compilation-config", f->config,
                  "JSON as vLLM's CompilationConfig: run steps compiled, in the token buckets "
                  "'{\"compile_sizes\": [1, 2, 4, 8]}' ('{}': 1, 2, 4, ... up to "
                  "--max-num-seqs)");
  cmd->add_option("--compile-cache-dir", f->cache_dir,
                  "the compile cache's host directory, shared by the engines of this host "
                  "(default $XDG_CACHE_HOME/switchyard/compile)");
  cmd->add_flag("--no-compile-cache", f->no_cache,
                "compile every bucket at start-up, keeping nothing");
  cmd->add_option("--compile-cache-redis", f->cache_redis,
                  "HOST:PORT of a Redis shared by hosts as the compile cache's third level "
                  "(off by default; needs --compile-cache-redis-key-file)");
  cmd->add_option("--compile-cache-redis-key-file", f->cache_redis_key_file,
                  "the key that signs and checks the Redis level's entries (16 bytes or more): "
                  "a writable shared cache is code execution");
}

absl::Status ApplyCompilationFlags(const CompilationFlags& f, int64_t max_num_seqs,
                                   int64_t max_num_batched_tokens,
                                   engine::LlamaRunnerOptions* runner) {
  SY_ASSIGN_OR_RETURN(const compile::CompilationConfig config,
                      compile::ParseCompilationConfig(f.config, f.enforce_eager, max_num_seqs,
                                                      max_num_batched_tokens));
  runner->compile_sizes = config.compile_sizes;
  if (!config.compile_sizes.empty()) {
    auto bar =
        std::make_shared<TerminalProgress>(stderr, "compiling steps", config.compile_sizes.size());
    runner->on_bucket_compiled = [bar](const compile::BucketBuild& build, size_t built,
                                       size_t /*total*/) {
      bar->Update(built, fmt::format("{} tokens: {}, {:.2f} s", build.shape.tokens, build.source,
                                     build.seconds));
    };
  }
  if (f.cache_redis.empty() != f.cache_redis_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--compile-cache-redis and --compile-cache-redis-key-file go together");
  }
  if (f.no_cache) {
    runner->compile_cache.reset();
    return absl::OkStatus();
  }
  compile::ArtefactCacheOptions cache;
  cache.host.root = f.cache_dir;
  if (!f.cache_redis.empty()) {
    compile::RedisCacheOptions redis;
    SY_RETURN_IF_ERROR(compile::ParseRedisAddress(f.cache_redis, &redis));
    redis.key_file = f.cache_redis_key_file;
    cache.redis = redis;
  }
  runner->compile_cache = cache;
  return absl::OkStatus();
}

}  // namespace switchyard::cli
