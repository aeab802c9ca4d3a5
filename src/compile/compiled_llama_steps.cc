#include "compile/compiled_llama_steps.h"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

#include "fmt/format.h"

#include "base/file.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "compile/cache_key.h"
#include "compile/entry_files.h"
#include "compile/fusion.h"
#include "compile/kernel_library.h"
#include "compile/matmul_tuning.h"

namespace switchyard::compile {

namespace {

// The identity of a bucket's tuning: what was measured and on what.
KeyFactors TuningFactors(const std::string& graph_digest, const runtime::Backend& backend,
                         const std::vector<std::string>& isa_features) {
  KeyFactors tuning;
  tuning.Set("measured_shapes", "where_paths_differ")
      .Set("panel_margin_percent", static_cast<int64_t>(kPanelMargin * 100));
  KeyFactors f;
  f.Set("artefact", "matmul_choices")
      .Set("graph", graph_digest)
      .Set("backend", std::string(backend.name()))
      .Set("isa_features", isa_features)
      .Set("tuning", std::move(tuning))
      .Set("project_version", std::string(ProjectVersion()));
  return f;
}

// The bucket's MatMul choices from the cache (measured there on a miss), applied to
// `program`; the level they came from.
absl::StatusOr<CacheLevel> TuneThroughCache(ArtefactCache* cache, const std::string& digest,
                                            const std::vector<std::string>& isa_features,
                                            StepProgram* program,
                                            std::vector<MatMulChoice>* choices) {
  const CacheKey key = ComputeCacheKey(TuningFactors(digest, *program->backend(), isa_features),
                                       NonSemanticFactors::Default(cache->host().root()));
  bool measured = false;
  SY_ASSIGN_OR_RETURN(const ArtefactLookup found,
                      cache->GetOrCompile(key, [&]() -> absl::StatusOr<CompiledArtefact> {
                        SY_ASSIGN_OR_RETURN(*choices, TuneMatMuls(program));
                        measured = true;
                        return CompiledArtefact{EncodeMatMulChoices(*choices), isa_features};
                      }));
  if (measured)
    return found.found_in;
  SY_ASSIGN_OR_RETURN(const std::string bytes, base::ReadFile(found.entry->artefact_path()));
  absl::StatusOr<std::vector<MatMulChoice>> cached = DecodeMatMulChoices(bytes);
  if (!cached.ok()) {
    // Checked bytes of a format this build does not read: measure here, keep the entry.
    SY_LOG_WARN("compile cache: entry {} is unreadable ({}); tuning this start", key.hex,
                std::string(cached.status().message()));
    SY_ASSIGN_OR_RETURN(*choices, TuneMatMuls(program));
    return CacheLevel::kCompiled;
  }
  *choices = *std::move(cached);
  ApplyMatMulChoices(*choices, program);
  return found.found_in;
}

// The buckets' generated kernels: built (or found in the cache) once per distinct set of
// specs, which the buckets of one model share; a build that failed is not tried again.
class RowKernelBuilds {
 public:
  // The library for `specs`; `*source` gets where it came from. A failure is logged once.
  absl::StatusOr<std::shared_ptr<const KernelLibrary>> Find(const std::vector<RowKernelSpec>& specs,
                                                            std::string_view isa,
                                                            ArtefactCache* cache,
                                                            std::string* source) {
    for (const Built& b : built_) {
      if (b.specs == specs) {
        *source = std::string(CacheLevelName(CacheLevel::kMemory));
        return b.library;
      }
    }
    if (!failure_.ok())
      return failure_;
    CacheLevel level = CacheLevel::kCompiled;
    absl::StatusOr<std::shared_ptr<const KernelLibrary>> library =
        KernelLibrary::Build(specs, isa, cache, &level);
    if (!library.ok()) {
      failure_ = library.status();
      SY_LOG_WARN("compiled steps run their element-wise ops unfused: {}",
                  std::string(failure_.message()));
      return failure_;
    }
    *source = std::string(CacheLevelName(level));
    built_.push_back({specs, *library});
    return *library;
  }

 private:
  struct Built {
    std::vector<RowKernelSpec> specs;
    std::shared_ptr<const KernelLibrary> library;
  };
  std::vector<Built> built_;
  absl::Status failure_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledLlamaSteps>> CompiledLlamaSteps::Create(
    model::LlamaModel* model, runtime::Backend* backend, const model::KvCacheStorage* kv,
    std::span<const int64_t> sizes, ArtefactCache* cache,
    const std::vector<std::string>& isa_features, const BucketBuilt& on_built) {
  std::vector<int64_t> sorted(sizes.begin(), sizes.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const model::LlamaModelOptions& options = model->options();
  for (int64_t size : sorted) {
    if (size <= 0 || size > options.max_num_batched_tokens) {
      return absl::InvalidArgumentError(
          fmt::format("compile size {}: a step holds 1 to {} tokens (max_num_batched_tokens)", size,
                      options.max_num_batched_tokens));
    }
  }
  auto steps = std::unique_ptr<CompiledLlamaSteps>(new CompiledLlamaSteps(model, backend, kv));
  const std::string_view outputs[] = {"logits"};
  const std::string isa = isa_features.empty() ? "portable" : isa_features.front();
  RowKernelBuilds kernels;
  for (int64_t size : sorted) {
    const auto start = std::chrono::steady_clock::now();
    const StepBucket shape{size, std::min(size, options.max_logit_rows)};
    SY_ASSIGN_OR_RETURN(StepGraph recorded, RecordLlamaStep(model->weights(), kv->shape().dtype,
                                                            kv->shape().block_size, shape));
    StepGraph graph = FuseRowKernels(recorded, *backend, outputs);
    BucketBuild build;
    std::shared_ptr<const KernelLibrary> library;
    if (!graph.kernels.empty()) {
      absl::StatusOr<std::shared_ptr<const KernelLibrary>> built =
          kernels.Find(graph.kernels, isa, cache, &build.kernels);
      if (built.ok()) {
        library = *std::move(built);
        build.fused_nodes =
            std::count_if(graph.nodes.begin(), graph.nodes.end(),
                          [](const StepNode& n) { return n.op == StepOp::kRowKernel; });
      } else {
        graph = std::move(recorded);
        build.kernels = "unavailable";
      }
    }
    std::string digest = graph.Digest();
    SY_ASSIGN_OR_RETURN(
        std::unique_ptr<StepProgram> program,
        StepProgram::Create(std::move(graph), backend, ResolveLlamaExternals(model->weights(), *kv),
                            outputs, std::move(library)));
    std::vector<MatMulChoice> choices;
    CacheLevel level = CacheLevel::kCompiled;
    if (cache != nullptr) {
      SY_ASSIGN_OR_RETURN(level,
                          TuneThroughCache(cache, digest, isa_features, program.get(), &choices));
    } else {
      SY_ASSIGN_OR_RETURN(choices, TuneMatMuls(program.get()));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    build.shape = shape;
    build.digest = std::move(digest);
    build.source = std::string(CacheLevelName(level));
    build.seconds = seconds;
    build.matmuls = std::move(choices);
    steps->buckets_.push_back({std::move(build), std::move(program)});
    if (on_built)
      on_built(steps->buckets_.back().build, steps->buckets_.size(), sorted.size());
  }
  return steps;
}

std::vector<int64_t> CompiledLlamaSteps::sizes() const {
  std::vector<int64_t> out;
  for (const Bucket& b : buckets_)
    out.push_back(b.build.shape.tokens);
  return out;
}

std::vector<BucketBuild> CompiledLlamaSteps::builds() const {
  std::vector<BucketBuild> out;
  for (const Bucket& b : buckets_)
    out.push_back(b.build);
  return out;
}

absl::StatusOr<bool> CompiledLlamaSteps::Forward(const model::ForwardBatch& batch,
                                                 std::span<float> logits) {
  const auto n = static_cast<int64_t>(batch.tokens.size());
  const auto r = static_cast<int64_t>(batch.logit_rows.size());
  const auto bucket = std::find_if(buckets_.begin(), buckets_.end(), [n, r](const Bucket& b) {
    return n <= b.build.shape.tokens && r <= b.build.shape.logit_rows;
  });
  if (bucket == buckets_.end())
    return false;
  SY_RETURN_IF_ERROR(model_->CheckBatch(batch, *kv_));
  const int64_t vocab = model_->config().vocab_size;
  if (logits.size() != static_cast<size_t>(r * vocab)) {
    return absl::InvalidArgumentError(
        fmt::format("forward: logits span holds {} floats, {} rows x {} vocab need {}",
                    logits.size(), r, vocab, r * vocab));
  }
  StepProgram& program = *bucket->program;
  const int64_t t = bucket->build.shape.tokens;
  // Each input padded to the bucket: token 0 at position 0 into no slot; logit row 0.
  const auto copy_in = [&](std::string_view name, std::span<const int32_t> values, int64_t size,
                           int32_t pad) -> absl::Status {
    staging_.assign(values.begin(), values.end());
    staging_.resize(static_cast<size_t>(size), pad);
    SY_ASSIGN_OR_RETURN(runtime::Tensor view, program.View(name, runtime::DType::kI32, {size}));
    return backend_->CopyToDevice(staging_.data(), view);
  };
  SY_RETURN_IF_ERROR(copy_in("tokens", batch.tokens, t, 0));
  SY_RETURN_IF_ERROR(copy_in("positions", batch.positions, t, 0));
  SY_RETURN_IF_ERROR(copy_in("slots", batch.slot_ids, t, -1));
  SY_RETURN_IF_ERROR(copy_in("rows", batch.logit_rows, bucket->build.shape.logit_rows, 0));
  SY_RETURN_IF_ERROR(program.Run(batch.sequences));
  if (r == 0) {
    SY_RETURN_IF_ERROR(backend_->Synchronize());
    return true;
  }
  SY_ASSIGN_OR_RETURN(runtime::Tensor out,
                      program.View("logits", runtime::DType::kF32, {r, vocab}));
  SY_RETURN_IF_ERROR(backend_->CopyToHost(out, logits.data()));
  return true;
}

}  // namespace switchyard::compile
