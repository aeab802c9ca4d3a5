// A model step, eager (LlamaModel::Forward) against compiled (CompiledLlamaSteps), in one
// process over one model and one KV cache, for issue 24's "compiled vs eager, same binary":
//   BM_DecodeStep/<mode>/<batch>: one step of `batch` sequences, one new token each, every
//     sequence with 256 tokens already cached (prefilled once, eagerly, before timing);
//   BM_PrefillStep/<mode>/512: a 512-token prompt of one sequence, in one step, into KV
//     blocks of its own;
// items_per_second counts tokens.
// The model is SY_BENCH_MODEL (a GGUF file or HF directory; default the bench-135m Q8_0
// file when tools/gen_models.py made it, else tiny-llama3: what the CI smoke run loads);
// threads from SY_BENCH_THREADS (default one per core). Run with
// --benchmark_enable_random_interleaving=true --benchmark_repetitions=N on a shared machine,
// so that eager and compiled see the same load.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "compile/compiled_llama_steps.h"
#include "model/kv_cache_storage.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "runtime/cpu/cpu_backend.h"

namespace switchyard::compile {
namespace {

constexpr int64_t kContext = 256;
constexpr int64_t kBlockSize = 16;
constexpr int64_t kMaxBatch = 32;
constexpr int64_t kPrefill = 512;
// Each decode sequence's blocks (its context and one new token).
constexpr int64_t kBlocksPerSequence = (kContext + 1 + kBlockSize - 1) / kBlockSize;

std::string ModelPath() {
  if (const char* env = std::getenv("SY_BENCH_MODEL"))
    return env;
  const std::string bench = std::string(SY_SOURCE_DIR) + "/models/bench/bench-135m/model-q8_0.gguf";
  return std::filesystem::exists(bench) ? bench
                                        : std::string(SY_SOURCE_DIR) + "/models/tiny-llama3";
}

// One model, its KV cache with kMaxBatch sequences of kContext tokens, and its compiled
// decode buckets; built on first use and shared by every benchmark.
struct Fixture {
  std::unique_ptr<model::ModelFiles> files;
  std::unique_ptr<runtime::Backend> backend;
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<model::KvCacheStorage> kv;
  std::unique_ptr<CompiledLlamaSteps> compiled;
  // Per batch size: the decode step's inputs.
  struct Step {
    std::vector<int32_t> tokens, positions, slots, rows;
    std::vector<std::vector<int32_t>> tables;
    std::vector<runtime::AttentionSequence> sequences;
  };
  std::map<int64_t, Step> steps;
  Step prefill;
};

// `batch` sequences of q_len new tokens after `done` cached ones, sequence b in the
// blocks from first_block + b * blocks_per_seq.
Fixture::Step MakeStep(int64_t batch, int64_t q_len, int64_t done,
                       int64_t blocks_per_seq = kBlocksPerSequence, int64_t first_block = 0) {
  Fixture::Step s;
  s.tables.resize(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int32_t>& table = s.tables[static_cast<size_t>(b)];
    for (int64_t i = 0; i < blocks_per_seq; ++i)
      table.push_back(static_cast<int32_t>(first_block + b * blocks_per_seq + i));
    runtime::AttentionSequence a;
    a.q_begin = static_cast<int64_t>(s.tokens.size());
    a.q_len = q_len;
    a.context_len = done + q_len;
    a.block_table = table;
    s.sequences.push_back(a);
    for (int64_t p = done; p < done + q_len; ++p) {
      s.tokens.push_back(static_cast<int32_t>((7 * p + 13 * b) % 200 + 1));
      s.positions.push_back(static_cast<int32_t>(p));
      s.slots.push_back(table[static_cast<size_t>(p / kBlockSize)] *
                            static_cast<int32_t>(kBlockSize) +
                        static_cast<int32_t>(p % kBlockSize));
    }
    s.rows.push_back(static_cast<int32_t>(s.tokens.size() - 1));
  }
  return s;
}

model::ForwardBatch BatchOf(const Fixture::Step& s) {
  return {s.tokens, s.positions, s.slots, s.sequences, s.rows};
}

Fixture& Shared() {
  static Fixture* fixture = [] {
    auto* f = new Fixture;
    auto files = model::ModelFiles::Open(ModelPath());
    if (!files.ok())
      std::abort();
    f->files = std::move(*files);
    runtime::CpuBackendOptions options;
    if (const char* threads = std::getenv("SY_BENCH_THREADS"))
      options.num_threads = std::strtoul(threads, nullptr, 10);
    auto backend = runtime::CreateCpuBackend(options);
    if (!backend.ok())
      std::abort();
    f->backend = std::move(*backend);
    model::LlamaModelOptions model_options;
    model_options.max_num_batched_tokens = kMaxBatch * kContext;
    model_options.max_logit_rows = kMaxBatch;
    auto m = model::LlamaModel::Create(*f->files, f->backend.get(), model_options);
    if (!m.ok())
      std::abort();
    f->model = std::move(*m);
    const int64_t prefill_blocks = kPrefill / kBlockSize;
    const int64_t blocks = kMaxBatch * kBlocksPerSequence + prefill_blocks;
    auto kv =
        model::KvCacheStorage::Create(f->backend.get(), f->model->KvShape(blocks, kBlockSize));
    if (!kv.ok())
      std::abort();
    f->kv = std::move(*kv);
    const std::vector<int64_t> sizes = {1, 4, 16, 32, kPrefill};
    const std::vector<std::string> isa = {
        std::string(runtime::CpuIsaName(options.isa.value_or(runtime::BestCpuIsa())))};
    auto compiled = CompiledLlamaSteps::Create(f->model.get(), f->backend.get(), f->kv.get(), sizes,
                                               nullptr, isa);
    if (!compiled.ok())
      std::abort();
    f->compiled = std::move(*compiled);
    // Every sequence's context, once.
    const Fixture::Step prefill = MakeStep(kMaxBatch, kContext, 0);
    std::vector<float> logits(prefill.rows.size() *
                              static_cast<size_t>(f->model->config().vocab_size));
    if (!f->model->Forward(BatchOf(prefill), *f->kv, logits).ok())
      std::abort();
    for (int64_t b : {1, 4, 16, 32})
      f->steps[b] = MakeStep(b, 1, kContext);
    f->prefill = MakeStep(1, kPrefill, 0, prefill_blocks, kMaxBatch * kBlocksPerSequence);
    return f;
  }();
  return *fixture;
}

// Runs `step` as timed; items are its tokens.
void RunStep(benchmark::State& state, Fixture& f, const Fixture::Step& step, bool compiled) {
  const model::ForwardBatch b = BatchOf(step);
  std::vector<float> logits(step.rows.size() * static_cast<size_t>(f.model->config().vocab_size));
  for (auto _ : state) {
    if (compiled) {
      absl::StatusOr<bool> ran = f.compiled->Forward(b, logits);
      if (!ran.ok() || !*ran)
        state.SkipWithError("the compiled step did not run");
    } else if (!f.model->Forward(b, *f.kv, logits).ok()) {
      state.SkipWithError("the eager step failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(step.tokens.size()));
}

void BM_DecodeStep(benchmark::State& state, bool compiled) {
  Fixture& f = Shared();
  RunStep(state, f, f.steps.at(state.range(0)), compiled);
}

void BM_PrefillStep(benchmark::State& state, bool compiled) {
  Fixture& f = Shared();
  RunStep(state, f, f.prefill, compiled);
}

BENCHMARK_CAPTURE(BM_DecodeStep, eager, false)->Arg(1)->Arg(4)->Arg(16)->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_DecodeStep, compiled, true)->Arg(1)->Arg(4)->Arg(16)->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_PrefillStep, eager, false)->Arg(kPrefill)->UseRealTime();
BENCHMARK_CAPTURE(BM_PrefillStep, compiled, true)->Arg(kPrefill)->UseRealTime();

}  // namespace
}  // namespace switchyard::compile

BENCHMARK_MAIN();
