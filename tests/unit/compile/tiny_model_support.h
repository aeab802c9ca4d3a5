// Test support for the compile tests that run a model: a bundled tiny model loaded on a CPU
// backend with its own KV caches, and a step of it recorded and bound as a StepProgram.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "compile/fusion.h"
#include "compile/kernel_library.h"
#include "compile/record_llama_step.h"
#include "compile/step_program.h"
#include "model/kv_cache_storage.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "runtime/cpu/cpu_backend.h"

namespace switchyard::compile {

struct TinyModelOptions {
  std::string name = "tiny-llama3";  // a folder of models/
  int num_threads = 0;               // the backend's default
  // Rows a forward pass may take and return (0: the model's defaults).
  int64_t max_num_batched_tokens = 0;
  int kv_caches = 1;  // KV caches of kv_blocks blocks of kv_block_size tokens each
  int64_t kv_blocks = 8;
  int64_t kv_block_size = 16;
  // The matrices' dtype in memory (the file's when unset).
  std::optional<runtime::DType> weight_dtype;
};

struct TinyModel {
  std::unique_ptr<model::ModelFiles> files;
  std::unique_ptr<runtime::Backend> backend;
  std::unique_ptr<model::LlamaModel> model;
  std::vector<std::unique_ptr<model::KvCacheStorage>> kv;
};

// Fails the calling test (and returns what it has) when a part does not load.
inline TinyModel LoadTinyModel(const TinyModelOptions& options = {}) {
  TinyModel t;
  auto files = model::ModelFiles::Open(std::string(SY_SOURCE_DIR) + "/models/" + options.name);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok())
    return t;
  t.files = std::move(*files);
  runtime::CpuBackendOptions backend_options;
  if (options.num_threads > 0)
    backend_options.num_threads = options.num_threads;
  auto backend = runtime::CreateCpuBackend(backend_options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok())
    return t;
  t.backend = std::move(*backend);
  model::LlamaModelOptions model_options;
  model_options.weight_dtype = options.weight_dtype;
  if (options.max_num_batched_tokens > 0) {
    model_options.max_num_batched_tokens = options.max_num_batched_tokens;
    model_options.max_logit_rows = options.max_num_batched_tokens;
  }
  auto m = model::LlamaModel::Create(*t.files, t.backend.get(), model_options);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok())
    return t;
  t.model = std::move(*m);
  for (int i = 0; i < options.kv_caches; ++i) {
    auto kv = model::KvCacheStorage::Create(
        t.backend.get(), t.model->KvShape(options.kv_blocks, options.kv_block_size));
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (kv.ok())
      t.kv.push_back(std::move(*kv));
  }
  return t;
}

// `bucket`'s step recorded on t's weights and bound to t's backend and KV cache `kv_index`,
// returning its logits; null (the test failed) when either step fails. With `fuse`, the
// graph is fused (fusion.h) and its kernels built for the backend's ISA, without a cache.
inline std::unique_ptr<StepProgram> CompileTinyStep(const TinyModel& t, StepBucket bucket,
                                                    size_t kv_index = 0, bool fuse = false) {
  const model::KvCacheStorage& kv = *t.kv.at(kv_index);
  auto graph = RecordLlamaStep(t.model->weights(), kv.shape().dtype, kv.shape().block_size, bucket);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok())
    return nullptr;
  const std::string_view outputs[] = {"logits"};
  std::shared_ptr<const KernelLibrary> kernels;
  if (fuse) {
    *graph = FuseRowKernels(*std::move(graph), *t.backend, outputs);
    CacheLevel level = CacheLevel::kCompiled;
    auto built = KernelLibrary::Build(graph->kernels, runtime::CpuIsaName(runtime::BestCpuIsa()),
                                      nullptr, &level);
    EXPECT_TRUE(built.ok()) << built.status();
    if (!built.ok())
      return nullptr;
    kernels = *std::move(built);
  }
  auto program =
      StepProgram::Create(*std::move(graph), t.backend.get(),
                          ResolveLlamaExternals(t.model->weights(), kv), outputs, kernels);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *std::move(program) : nullptr;
}

}  // namespace switchyard::compile
