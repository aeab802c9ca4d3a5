// CompiledLlamaSteps: a Llama-family model's steps as StepPrograms, one per token bucket
// (vLLM's compile_sizes), built when the runner starts: recorded, fused (fusion.h, with
// their generated kernels built or found in the cache: kernel_library.h), bound, and their
// MatMul paths tuned (matmul_tuning.h). With a compile cache the tuning is the cached artefact:
// keyed by the graph's digest, the backend (kernel level and threads), the tuning rules and
// the project version, it is measured once per host (or fleet, with Redis) and loaded by
// every later start. A step runs in the smallest bucket
// that holds its tokens and logit rows, padded as StepProgram says; a step larger than
// every bucket is not taken (the caller runs it eagerly).
//
// A bucket of T tokens has min(T, max_logit_rows) logit rows. Threads: one thread drives
// it, as the backend. Borrows the model, its backend and the KV storage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "compile/artefact_cache.h"
#include "compile/matmul_tuning.h"
#include "compile/record_llama_step.h"
#include "compile/step_program.h"
#include "model/forward_batch.h"
#include "model/kv_cache_storage.h"
#include "model/llama_model.h"

namespace switchyard::compile {

// How one bucket's step came to be, for the startup report.
struct BucketBuild {
  StepBucket shape;
  std::string digest;  // StepGraph::Digest
  // Where its tuning came from: "compiled" (measured now), or the compile cache level that
  // had it ("memory", "host", "redis").
  std::string source;
  double seconds = 0.0;
  std::vector<MatMulChoice> matmuls;  // the tuned MatMul shapes (matmul_tuning.h)
  // Its fused nodes (fusion.h) and where their generated kernels came from: a cache level
  // or "compiled" as for the tuning; "none" when nothing fused; "unavailable" when they
  // could not be built (no compiler, say), so the step runs its ops unfused.
  int64_t fused_nodes = 0;
  std::string kernels = "none";
};

// Called after each bucket is built: its build, how many are built, and how many in all.
using BucketBuilt = std::function<void(const BucketBuild& build, size_t built, size_t total)>;

class CompiledLlamaSteps {
 public:
  // `sizes`: the token buckets (positive, at most the model's max_num_batched_tokens; any
  // order, duplicates ignored). `cache` (may be null: tune and build every start) keeps the
  // tuning and the generated kernels, for a backend whose code needs `isa_features`
  // (isa_features.h names; the first is the ISA level generated kernels are built for,
  // "portable" when there is none). Errors: a bad
  // size, a model whose steps cannot be recorded (Unimplemented: mixture of experts), the
  // backend's, the cache's host directory's (it cannot be written). `on_built` (may be
  // empty) hears of each bucket as it is done, e.g. for a progress bar.
  static absl::StatusOr<std::unique_ptr<CompiledLlamaSteps>> Create(
      model::LlamaModel* model, runtime::Backend* backend, const model::KvCacheStorage* kv,
      std::span<const int64_t> sizes, ArtefactCache* cache = nullptr,
      const std::vector<std::string>& isa_features = {}, const BucketBuilt& on_built = {});

  // The buckets' token counts, ascending.
  std::vector<int64_t> sizes() const;
  // Each bucket's build, ascending by tokens.
  std::vector<BucketBuild> builds() const;

  // Runs `batch` in its bucket and writes its logit rows into `logits` (as
  // LlamaModel::Forward does, with its checks); false, with nothing run, when no bucket
  // holds the batch.
  absl::StatusOr<bool> Forward(const model::ForwardBatch& batch, std::span<float> logits);

 private:
  struct Bucket {
    BucketBuild build;
    std::unique_ptr<StepProgram> program;
  };
  CompiledLlamaSteps(model::LlamaModel* model, runtime::Backend* backend,
                     const model::KvCacheStorage* kv)
      : model_(model), backend_(backend), kv_(kv) {}

  model::LlamaModel* model_;
  runtime::Backend* backend_;
  const model::KvCacheStorage* kv_;
  std::vector<Bucket> buckets_;  // by tokens, ascending
  std::vector<int32_t> staging_;
};

}  // namespace switchyard::compile
