// CPU backend PagedAttention at SmolLM2-135M's shape (9 query heads, 3 kv heads, head_dim
// 64; block size 16), per call, i.e. one layer:
//   BM_AttentionDecode/<kv dtype>/<context>: one query row over `context` cached tokens;
//     bytes_per_second counts the K/V bytes read.
//   BM_AttentionPrefill/<kv dtype>/<rows>: a causal prompt of `rows` tokens in one call.
//   BM_AttentionDecodeBatch/<kv dtype>/<sequences>: one decode row each for `sequences`
//     sequences of 512 cached tokens, as batched decode runs it; the call cycles through
//     enough layers' pools (>= 96 MiB) that the K/V rows come from memory, as in a model.
//   BM_AttentionDecodeShared/<kv dtype>/<sequences>: one decode row each for `sequences`
//     sequences whose first 1,024 of 1,088 cached tokens are the same blocks.
// Kernel level from SY_CPU_ISA (default the best the CPU has); threads from
// SY_BENCH_THREADS (default one per core). On a shared machine, 1 thread and the CPU time
// column say most about the kernels themselves.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <utility>
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

// One layer's K/V pools: `slots` rows of kKvHeads x kHeadDim random values.
// Allocated by the backend, as the engine's pools are (kv_cache_storage.h).
struct KvPools {
  Buffer k_data;
  Buffer v_data;
  Tensor k_pool;
  Tensor v_pool;
};

bool FillPools(Backend& backend, DType kv_dtype, int64_t num_blocks, std::mt19937& rng,
               KvPools* pools) {
  const int64_t slots = num_blocks * kBlockSize;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t pool_bytes = RowBytes(kv_dtype, slots * kKvHeads * kHeadDim);
  absl::StatusOr<Buffer> k_data = backend.Allocate(pool_bytes);
  absl::StatusOr<Buffer> v_data = backend.Allocate(pool_bytes);
  if (!k_data.ok() || !v_data.ok())
    return false;
  pools->k_data = std::move(k_data).value();
  pools->v_data = std::move(v_data).value();
  pools->k_pool = Tensor(kv_dtype, {num_blocks, kBlockSize, kKvHeads, kHeadDim},
                         pools->k_data.data(), MemorySpace::kHost);
  pools->v_pool = Tensor(kv_dtype, {num_blocks, kBlockSize, kKvHeads, kHeadDim},
                         pools->v_data.data(), MemorySpace::kHost);
  std::vector<float> k(static_cast<size_t>(slots * kKvHeads * kHeadDim));
  std::vector<float> v(k.size());
  for (float& f : k)
    f = dist(rng);
  for (float& f : v)
    f = dist(rng);
  std::vector<int32_t> slot_ids(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i)
    slot_ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  return backend
      .WriteKv(Tensor(DType::kF32, {slots, kKvHeads, kHeadDim}, k.data(), MemorySpace::kHost),
               Tensor(DType::kF32, {slots, kKvHeads, kHeadDim}, v.data(), MemorySpace::kHost),
               Tensor(DType::kI32, {slots}, slot_ids.data(), MemorySpace::kHost), pools->k_pool,
               pools->v_pool)
      .ok();
}

// `num_seqs` sequences of `context` cached tokens each, `q_len` new rows each (the last
// q_len positions), over `layers` copies of the pools used in turn. The first
// `shared_blocks` blocks of every sequence are the same blocks (a prefix-cache hit).
void RunAttention(benchmark::State& state, DType kv_dtype, int64_t context, int64_t q_len,
                  int64_t num_seqs, int64_t layers, int64_t shared_blocks = 0) {
  Backend& backend = SharedBackend();
  const int64_t seq_blocks = (context + kBlockSize - 1) / kBlockSize;
  const int64_t own_blocks = seq_blocks - shared_blocks;
  const int64_t num_blocks = shared_blocks + own_blocks * num_seqs;
  std::mt19937 rng(5);
  std::vector<KvPools> pools(static_cast<size_t>(layers));
  for (KvPools& p : pools) {
    if (!FillPools(backend, kv_dtype, num_blocks, rng, &p)) {
      state.SkipWithError("WriteKv failed");
      return;
    }
  }
  // Blocks in reverse order, so that the tables are not the identity; the shared ones are
  // the pool's last.
  std::vector<int32_t> table;
  for (int64_t s = 0; s < num_seqs; ++s) {
    for (int64_t b = 0; b < shared_blocks; ++b)
      table.push_back(static_cast<int32_t>(num_blocks - 1 - b));
    for (int64_t b = 0; b < own_blocks; ++b)
      table.push_back(static_cast<int32_t>(own_blocks * (num_seqs - s) - 1 - b));
  }
  std::vector<AttentionSequence> seqs;
  for (int64_t s = 0; s < num_seqs; ++s) {
    seqs.push_back({s * q_len, q_len, context,
                    std::span<const int32_t>(table).subspan(static_cast<size_t>(s * seq_blocks),
                                                            static_cast<size_t>(seq_blocks))});
  }
  const int64_t rows = q_len * num_seqs;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(rows * kHeads * kHeadDim));
  for (float& f : q)
    f = dist(rng);
  std::vector<float> out(q.size());
  const Tensor qt(DType::kF32, {rows, kHeads, kHeadDim}, q.data(), MemorySpace::kHost);
  const Tensor ot(DType::kF32, {rows, kHeads, kHeadDim}, out.data(), MemorySpace::kHost);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  size_t layer = 0;
  for (auto _ : state) {
    const KvPools& p = pools[layer];
    layer = (layer + 1) % pools.size();
    if (!backend.PagedAttention(qt, p.k_pool, p.v_pool, seqs, scale, /*window=*/0, ot).ok())
      state.SkipWithError("PagedAttention failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * num_seqs *
                          static_cast<int64_t>(RowBytes(kv_dtype, context * kKvHeads * kHeadDim)));
}

void BM_AttentionDecode_F32(benchmark::State& s) {
  RunAttention(s, DType::kF32, s.range(0), 1, 1, 1);
}
void BM_AttentionDecode_F16(benchmark::State& s) {
  RunAttention(s, DType::kF16, s.range(0), 1, 1, 1);
}
void BM_AttentionPrefill_F32(benchmark::State& s) {
  RunAttention(s, DType::kF32, s.range(0), s.range(0), 1, 1);
}
void BM_AttentionPrefill_F16(benchmark::State& s) {
  RunAttention(s, DType::kF16, s.range(0), s.range(0), 1, 1);
}
void BM_AttentionDecodeBatch_F16(benchmark::State& s) {
  constexpr int64_t kContext = 512;
  const int64_t layer_bytes =
      2 * s.range(0) * static_cast<int64_t>(RowBytes(DType::kF16, kContext * kKvHeads * kHeadDim));
  RunAttention(s, DType::kF16, kContext, 1, s.range(0), (int64_t{96} << 20) / layer_bytes + 1);
}
// 32 sequences of 1,088 tokens whose first 1,024 are one shared prefix (serving_bench.py's
// "shared" workload), one layer's pools.
void BM_AttentionDecodeShared_F16(benchmark::State& s) {
  RunAttention(s, DType::kF16, 1088, 1, s.range(0), 1, 1024 / kBlockSize);
}
BENCHMARK(BM_AttentionDecode_F32)->Arg(512)->Arg(4096)->UseRealTime();
BENCHMARK(BM_AttentionDecode_F16)->Arg(512)->Arg(4096)->UseRealTime();
BENCHMARK(BM_AttentionPrefill_F32)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionPrefill_F16)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionDecodeBatch_F16)->Arg(32)->UseRealTime();
BENCHMARK(BM_AttentionDecodeShared_F16)->Arg(32)->UseRealTime();

}  // namespace
}  // namespace switchyard::runtime

BENCHMARK_MAIN();
