// CPU backend PagedAttention at SmolLM2-135M's shape (9 query heads, 3 kv heads, head_dim
// 64; block size 16), per call, i.e. one layer:
//   BM_AttentionDecode/<kv dtype>/<context>: one query row over `context` cached tokens;
//     bytes_per_second counts the K/V bytes read.
//   BM_AttentionPrefill/<kv dtype>/<rows>: a causal prompt of `rows` tokens in one call.
// Kernel level from SY_CPU_ISA (default the best the CPU has); threads from
// SY_BENCH_THREADS (default one per core). On a shared machine, 1 thread and the CPU time
// column say most about the kernels themselves.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/cpu/cpu_backend.h"

namespace switchyard::runtime {
namespace {

constexpr int64_t kHeads = 9;
constexpr int64_t kKvHeads = 3;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kBlockSize = 16;

Backend& SharedBackend() {
  static std::unique_ptr<Backend> backend = [] {
    const char* threads = std::getenv("SY_BENCH_THREADS");
    auto made = CreateCpuBackend(
        {.num_threads = threads == nullptr ? 0 : std::strtoul(threads, nullptr, 10)});
    if (!made.ok())
      std::abort();
    return std::move(made).value();
  }();
  return *backend;
}

void RunAttention(benchmark::State& state, DType kv_dtype, int64_t q_len) {
  const int64_t context = state.range(0);
  Backend& backend = SharedBackend();
  const int64_t num_blocks = (context + kBlockSize - 1) / kBlockSize;
  const int64_t slots = num_blocks * kBlockSize;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v)
      f = dist(rng);
    return v;
  };
  const size_t pool_bytes = RowBytes(kv_dtype, slots * kKvHeads * kHeadDim);
  std::vector<uint8_t> k_data(pool_bytes), v_data(pool_bytes);
  const Tensor k_pool(kv_dtype, {num_blocks, kBlockSize, kKvHeads, kHeadDim}, k_data.data(),
                      MemorySpace::kHost);
  const Tensor v_pool(kv_dtype, {num_blocks, kBlockSize, kKvHeads, kHeadDim}, v_data.data(),
                      MemorySpace::kHost);
  std::vector<float> k = random(slots * kKvHeads * kHeadDim);
  std::vector<float> v = random(slots * kKvHeads * kHeadDim);
  std::vector<int32_t> slot_ids(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i)
    slot_ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (!backend
           .WriteKv(Tensor(DType::kF32, {slots, kKvHeads, kHeadDim}, k.data(), MemorySpace::kHost),
                    Tensor(DType::kF32, {slots, kKvHeads, kHeadDim}, v.data(), MemorySpace::kHost),
                    Tensor(DType::kI32, {slots}, slot_ids.data(), MemorySpace::kHost), k_pool,
                    v_pool)
           .ok()) {
    state.SkipWithError("WriteKv failed");
    return;
  }
  // Blocks in reverse order, so that the table is not the identity.
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  for (int64_t b = 0; b < num_blocks; ++b)
    table[static_cast<size_t>(b)] = static_cast<int32_t>(num_blocks - 1 - b);
  std::vector<float> q = random(q_len * kHeads * kHeadDim);
  std::vector<float> out(q.size());
  const AttentionSequence seq{0, q_len, context, table};
  const Tensor qt(DType::kF32, {q_len, kHeads, kHeadDim}, q.data(), MemorySpace::kHost);
  const Tensor ot(DType::kF32, {q_len, kHeads, kHeadDim}, out.data(), MemorySpace::kHost);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  for (auto _ : state) {
    if (!backend.PagedAttention(qt, k_pool, v_pool, {&seq, 1}, scale, /*window=*/0, ot).ok())
      state.SkipWithError("PagedAttention failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 *
                          static_cast<int64_t>(RowBytes(kv_dtype, context * kKvHeads * kHeadDim)));
}

void BM_AttentionDecode_F32(benchmark::State& s) {
  RunAttention(s, DType::kF32, 1);
}
void BM_AttentionDecode_F16(benchmark::State& s) {
  RunAttention(s, DType::kF16, 1);
}
void BM_AttentionPrefill_F32(benchmark::State& s) {
  RunAttention(s, DType::kF32, s.range(0));
}
void BM_AttentionPrefill_F16(benchmark::State& s) {
  RunAttention(s, DType::kF16, s.range(0));
}
BENCHMARK(BM_AttentionDecode_F32)->Arg(512)->Arg(4096)->UseRealTime();
BENCHMARK(BM_AttentionDecode_F16)->Arg(512)->Arg(4096)->UseRealTime();
BENCHMARK(BM_AttentionPrefill_F32)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionPrefill_F16)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace switchyard::runtime

BENCHMARK_MAIN();
