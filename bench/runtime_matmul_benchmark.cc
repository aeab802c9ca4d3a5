// CPU backend MatMul throughput next to the machine's own memory bandwidth, in one binary
// so the ratio is visible in one run:
//   BM_StreamRead: sums a 512 MiB array on all threads (the bandwidth a GEMV can hope for).
//   BM_Gemv/<dtype>: [1, k] x [m, k]^T at Llama-3.2-1B and SmolLM2-135M shapes;
//     bytes_per_second counts weight bytes streamed and bw_frac divides that by the
//     all-thread read bandwidth measured once at start-up (1.0 = at the memory roof).
//   BM_Gemm512/<dtype>: n = 512 prefill rows; GFLOPs counts 2 n m k per second;
//     *_BF16_Packed with the weights packed first, as a loaded model's are.
//   *_BF16_F32Act: BF16 weights with f32 activations (round_bf16_activations off), next
//     to the default that rounds them to bf16 where the CPU has AVX512_BF16.
//   BM_SmallBatch_<dtype>/<k>/<m>/<n>: few rows, weights cold; *_BF16_Packed with the
//     weights packed first (Backend::PackMatMulWeights), as a loaded model's are.
//   BM_GemvHot_<dtype>/<k>/<m>/<isa>/<direct>: the int8 GEMV kernel of GGML quantized
//     weights alone, one thread, weights in cache (k x m = 2048 x 256 fits L2), on AVX2
//     (isa 0) or AVX-512 VNNI (1), through the decoded copy (direct 0) or straight from
//     the weight bytes (1): the kernels' compute cost without the memory's.
// Kernel level from SY_CPU_ISA (portable|avx2|avx512), default the best the CPU has;
// MatMul threads from SY_BENCH_THREADS (default one per core).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/thread_pool.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/float16.h"

namespace switchyard::runtime {
namespace {

std::unique_ptr<Backend> MakeBackend(bool round_bf16_activations) {
  const char* threads = std::getenv("SY_BENCH_THREADS");
  auto made =
      CreateCpuBackend({.num_threads = threads == nullptr ? 0 : std::strtoul(threads, nullptr, 10),
                        .round_bf16_activations = round_bf16_activations});
  if (!made.ok())
    std::abort();
  return std::move(made).value();
}

Backend& SharedBackend(bool exact_activations) {
  static std::unique_ptr<Backend> backend = MakeBackend(true);
  static std::unique_ptr<Backend> exact = MakeBackend(false);
  return exact_activations ? *exact : *backend;
}

// Random bytes for a row of GGML blocks, with every fp16 scale field set to a small
// normal value (random bits could be subnormal, which some CPUs multiply slowly).
void RandomGgmlRow(DType dtype, std::mt19937& rng, uint8_t* dst, size_t row_bytes) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < row_bytes; ++i)
    dst[i] = static_cast<uint8_t>(byte(rng));
  const uint16_t scale = F32ToF16(0.01f);
  const auto block_bytes = static_cast<size_t>(DTypeBlockBytes(dtype));
  for (size_t b = 0; b < row_bytes; b += block_bytes) {
    switch (dtype) {
      case DType::kQ6_K:  // d last
      case DType::kQ3_K:
        std::memcpy(dst + b + block_bytes - 2, &scale, 2);
        break;
      case DType::kQ2_K:  // d, dmin last
        std::memcpy(dst + b + block_bytes - 4, &scale, 2);
        std::memcpy(dst + b + block_bytes - 2, &scale, 2);
        break;
      case DType::kQ4_1:  // d, m
      case DType::kQ5_1:
      case DType::kQ4_K:  // d, dmin
      case DType::kQ5_K:
        std::memcpy(dst + b + 2, &scale, 2);
        [[fallthrough]];
      default:  // d first
        std::memcpy(dst + b, &scale, 2);
        break;
    }
  }
}

std::vector<uint8_t> RandomWeights(DType dtype, int64_t m, int64_t k) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(k));
  const size_t row_bytes = RowBytes(dtype, k);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) {
    for (float& f : row)
      f = dist(rng);
    uint8_t* dst = bytes.data() + static_cast<size_t>(r) * row_bytes;
    if (dtype == DType::kQ8_0) {
      QuantizeRowQ8_0(row.data(), k, dst);
    } else if (IsGgmlQuantDType(dtype)) {
      RandomGgmlRow(dtype, rng, dst, row_bytes);
    } else {
      for (int64_t t = 0; t < k; ++t) {
        if (dtype == DType::kF32) {
          std::memcpy(dst + 4 * t, &row[static_cast<size_t>(t)], 4);
        } else {
          const uint16_t h = dtype == DType::kBF16 ? F32ToBf16(row[static_cast<size_t>(t)])
                                                   : F32ToF16(row[static_cast<size_t>(t)]);
          std::memcpy(dst + 2 * t, &h, 2);
        }
      }
    }
  }
  return bytes;
}

// All-thread read bandwidth of a 512 MiB array, measured once per process (best of 3), so
// every GEMV can report its weight stream as a fraction of it.
double StreamReadBytesPerSecond();

// `packed`: the weights are packed first (Backend::PackMatMulWeights), as a model's are.
void RunMatMul(benchmark::State& state, DType dtype, int64_t n, bool exact_activations = false,
               bool packed = false) {
  const int64_t k = state.range(0);
  const int64_t m = state.range(1);
  Backend& backend = SharedBackend(exact_activations);
  std::vector<uint8_t> w = RandomWeights(dtype, m, k);
  // Decode streams every layer's weights once per token, from memory: few-row runs (both
  // sides of the streaming/panel crossover) cycle through enough copies (>= 96 MiB) that
  // none is still in the 32 MiB L3 when reused.
  const size_t copies = n <= 64 ? std::max<size_t>(1, (size_t{96} << 20) / w.size() + 1) : 1;
  std::vector<std::vector<uint8_t>> weights(copies, w);
  std::vector<Tensor> tensors;
  for (std::vector<uint8_t>& copy : weights)
    tensors.emplace_back(dtype, std::initializer_list<int64_t>{m, k}, copy.data(),
                         MemorySpace::kHost);
  Buffer packed_copies;
  if (packed) {
    absl::StatusOr<Buffer> made = backend.PackMatMulWeights(tensors);
    if (!made.ok() || made->size_bytes() == 0) {
      state.SkipWithError("nothing packed");
      return;
    }
    packed_copies = std::move(made).value();
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (float& f : x)
    f = dist(rng);
  std::vector<float> out(static_cast<size_t>(n * m));
  const Tensor xt(DType::kF32, {n, k}, x.data(), MemorySpace::kHost);
  const Tensor ot(DType::kF32, {n, m}, out.data(), MemorySpace::kHost);
  size_t next = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const Tensor& wt = tensors[next];
    next = (next + 1) % copies;
    if (!backend.MatMul(xt, wt, nullptr, ot).ok())
      state.SkipWithError("MatMul failed");
    benchmark::DoNotOptimize(out.data());
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  const double iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.counters["GFLOPs"] =
      iterations * 2.0 * static_cast<double>(n * m * k) * 1e-9 / took.count();
  if (n <= 16) {
    // Weight bytes streamed per second over the machine's read bandwidth: 1.0 is the roof.
    state.counters["bw_frac"] =
        iterations * static_cast<double>(w.size()) / took.count() / StreamReadBytesPerSecond();
  }
  state.SetLabel(std::string(backend.name()));
}

// Sums [lo, hi) of data (a tail of fewer than 32 floats left out) in two 16-float vectors
// (GCC/clang vector extensions; two, so that they stay in SSE registers), so that the adds
// keep up with memory even in a portable build: a scalar-looking loop left to the -O2
// vectorizer ran at ~60% of the bandwidth a GEMV reaches.
using Vec16 = float __attribute__((vector_size(64)));
float SumRange(const float* data, size_t lo, size_t hi) {
  Vec16 acc0 = {};
  Vec16 acc1 = {};
  for (size_t i = lo; i + 32 <= hi; i += 32) {
    Vec16 v0;
    Vec16 v1;
    std::memcpy(&v0, data + i, sizeof(v0));
    std::memcpy(&v1, data + i + 16, sizeof(v1));
    acc0 += v0;
    acc1 += v1;
  }
  const Vec16 total = acc0 + acc1;
  float s = 0;
  for (int l = 0; l < 16; ++l)
    s += total[l];
  return s;
}

struct StreamArray {
  static constexpr size_t kBytes = size_t{512} << 20;
  std::vector<float> data = std::vector<float>(kBytes / sizeof(float), 1.0f);
  size_t threads = std::max(1u, std::thread::hardware_concurrency());
  // The calling thread is one of `threads`, as in the CPU backend.
  std::unique_ptr<base::ThreadPool> pool = threads > 1
                                               ? std::make_unique<base::ThreadPool>(threads - 1,
                                                                                    "bench-stream")
                                               : nullptr;
  std::vector<double> sums = std::vector<double>(threads);

  void ReadAll() {
    const size_t count = data.size();
    auto sum = [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t)
        sums[t] = SumRange(data.data(), count * t / threads, count * (t + 1) / threads);
    };
    if (pool != nullptr) {
      pool->ParallelFor(threads, sum);
    } else {
      sum(0, threads);
    }
    benchmark::DoNotOptimize(sums.data());
  }
};

double StreamReadBytesPerSecond() {
  static const double bytes_per_second = [] {
    StreamArray stream;
    stream.ReadAll();
    double best = 0.0;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      stream.ReadAll();
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      best = std::max(best, static_cast<double>(StreamArray::kBytes) / took.count());
    }
    return best;
  }();
  return bytes_per_second;
}

void BM_StreamRead(benchmark::State& state) {
  StreamArray stream;
  for (auto _ : state)
    stream.ReadAll();
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(StreamArray::kBytes));
}
BENCHMARK(BM_StreamRead)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = size_t{256} << 20;
  std::vector<uint8_t> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

// {k, m} of the projections of Llama-3.2-1B (hidden 2048, kv 512, ffn 8192; lm_head rows
// cut to 32768 of 128256) and SmolLM2-135M (hidden 576, kv 192, ffn 1536), those whose k
// is a multiple of `k_multiple`.
void AddModelShapes(benchmark::internal::Benchmark* b, int64_t k_multiple) {
  constexpr int64_t kShapes[][2] = {{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048},
                                    {576, 576},   {576, 192},  {576, 1536},  {1536, 576}};
  for (const auto& [k, m] : kShapes) {
    if (k % k_multiple == 0)
      b->Args({k, m});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
void ModelShapes(benchmark::internal::Benchmark* b) {
  AddModelShapes(b, 1);
}
// K-quant rows are whole 256-weight blocks, so SmolLM2's k = 576 has no K-quant form
// (llama.cpp stores those tensors in another type).
void KQuantShapes(benchmark::internal::Benchmark* b) {
  AddModelShapes(b, DTypeBlockElems(DType::kQ4_K));
}
void GemvShapes(benchmark::internal::Benchmark* b) {
  ModelShapes(b);
  b->Args({2048, 32768});
}
void KQuantGemvShapes(benchmark::internal::Benchmark* b) {
  KQuantShapes(b);
  b->Args({2048, 32768});
}

void BM_Gemv_F32(benchmark::State& s) {
  RunMatMul(s, DType::kF32, 1);
}
void BM_Gemv_BF16(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, 1);
}
void BM_Gemv_F16(benchmark::State& s) {
  RunMatMul(s, DType::kF16, 1);
}
void BM_Gemv_Q8_0(benchmark::State& s) {
  RunMatMul(s, DType::kQ8_0, 1);
}
void BM_Gemv_BF16_F32Act(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, 1, /*exact_activations=*/true);
}
void BM_Gemv_Q4_0(benchmark::State& s) {
  RunMatMul(s, DType::kQ4_0, 1);
}
void BM_Gemv_Q4_1(benchmark::State& s) {
  RunMatMul(s, DType::kQ4_1, 1);
}
void BM_Gemv_Q4_K(benchmark::State& s) {
  RunMatMul(s, DType::kQ4_K, 1);
}
void BM_Gemv_Q6_K(benchmark::State& s) {
  RunMatMul(s, DType::kQ6_K, 1);
}
BENCHMARK(BM_Gemv_F32)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_Q4_0)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_Q4_1)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_Q4_K)->Apply(KQuantGemvShapes);
BENCHMARK(BM_Gemv_Q6_K)->Apply(KQuantGemvShapes);
BENCHMARK(BM_Gemv_BF16)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_BF16_F32Act)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_F16)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_Q8_0)->Apply(GemvShapes);

void BM_Gemm512_F32(benchmark::State& s) {
  RunMatMul(s, DType::kF32, 512);
}
void BM_Gemm512_BF16(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, 512);
}
void BM_Gemm512_BF16_Packed(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, 512, /*exact_activations=*/false, /*packed=*/true);
}
void BM_Gemm512_BF16_F32Act(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, 512, /*exact_activations=*/true);
}
void BM_Gemm512_Q8_0(benchmark::State& s) {
  RunMatMul(s, DType::kQ8_0, 512);
}
void BM_Gemm512_Q4_1(benchmark::State& s) {
  RunMatMul(s, DType::kQ4_1, 512);
}
void BM_Gemm512_Q4_K(benchmark::State& s) {
  RunMatMul(s, DType::kQ4_K, 512);
}
void BM_Gemm512_Q6_K(benchmark::State& s) {
  RunMatMul(s, DType::kQ6_K, 512);
}
BENCHMARK(BM_Gemm512_F32)->Apply(ModelShapes);
BENCHMARK(BM_Gemm512_Q4_1)->Apply(ModelShapes);
BENCHMARK(BM_Gemm512_Q4_K)->Apply(KQuantShapes);
BENCHMARK(BM_Gemm512_Q6_K)->Apply(KQuantShapes);
BENCHMARK(BM_Gemm512_BF16)->Apply(ModelShapes);
BENCHMARK(BM_Gemm512_BF16_Packed)->Apply(ModelShapes);
BENCHMARK(BM_Gemm512_BF16_F32Act)->Apply(ModelShapes);
BENCHMARK(BM_Gemm512_Q8_0)->Apply(ModelShapes);

// Few-row crossover between the streaming and the packed-panel paths.
void BM_SmallBatch_BF16(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, s.range(2));
}
// The same weights packed at load: one kernel at every row count.
void BM_SmallBatch_BF16_Packed(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, s.range(2), /*exact_activations=*/false, /*packed=*/true);
}
void BM_SmallBatch_BF16_F32Act(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, s.range(2), /*exact_activations=*/true);
}
void BM_SmallBatch_Q8_0(benchmark::State& s) {
  RunMatMul(s, DType::kQ8_0, s.range(2));
}
void SmallBatchShapes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {2, 4, 6, 8, 12, 16, 17, 24, 32, 48, 64}) {
    b->Args({2048, 2048, n});
    b->Args({576, 1536, n});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_SmallBatch_BF16)->Apply(SmallBatchShapes);
BENCHMARK(BM_SmallBatch_BF16_Packed)->Apply(SmallBatchShapes);
BENCHMARK(BM_SmallBatch_BF16_F32Act)->Apply(SmallBatchShapes);
BENCHMARK(BM_SmallBatch_Q8_0)->Apply(SmallBatchShapes);

void RunGemvHot(benchmark::State& state, DType dtype) {
  const int64_t k = state.range(0);
  const int64_t m = state.range(1);
  const bool avx512 = state.range(2) != 0;
  const bool direct = state.range(3) != 0;
  if (avx512 ? !cpu::CpuSupportsAvx512Vnni() : !CpuSupportsIsa(CpuIsa::kAvx2)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const cpu::QuantKernels& kernels = avx512 ? cpu::Avx512QuantKernels() : cpu::Avx2QuantKernels();
  const std::vector<uint8_t> w = RandomWeights(dtype, m, k);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  for (float& f : x)
    f = dist(rng);
  const int64_t ldq = (k + 255) / 256 * 256;
  std::vector<int8_t> q(static_cast<size_t>(ldq));
  std::vector<float> s(static_cast<size_t>(ldq / 4));
  std::vector<float> mins(static_cast<size_t>(ldq / 16));
  kernels.quantize(x.data(), k, ldq, q.data(), s.data(), mins.data());
  const cpu::QuantActivations xq{q.data(), s.data(), mins.data(), ldq};
  const auto gemv = direct ? kernels.gemv : kernels.dot_rows;
  std::vector<float> out(static_cast<size_t>(m));
  for (auto _ : state) {
    gemv(dtype, xq, 1, k, w.data(), RowBytes(dtype, k), 0, m, out.data(), m);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.SetLabel(std::string(avx512 ? "avx512" : "avx2") + (direct ? " direct" : " decoded"));
}
void GemvHotArgs(benchmark::internal::Benchmark* b) {
  for (int64_t isa : {0, 1}) {
    for (int64_t direct : {0, 1})
      b->Args({2048, 256, isa, direct});
  }
  b->Unit(benchmark::kMicrosecond);
}
void BM_GemvHot_Q4_0(benchmark::State& s) {
  RunGemvHot(s, DType::kQ4_0);
}
void BM_GemvHot_Q4_1(benchmark::State& s) {
  RunGemvHot(s, DType::kQ4_1);
}
void BM_GemvHot_Q5_0(benchmark::State& s) {
  RunGemvHot(s, DType::kQ5_0);
}
void BM_GemvHot_Q5_1(benchmark::State& s) {
  RunGemvHot(s, DType::kQ5_1);
}
void BM_GemvHot_Q4_K(benchmark::State& s) {
  RunGemvHot(s, DType::kQ4_K);
}
void BM_GemvHot_Q5_K(benchmark::State& s) {
  RunGemvHot(s, DType::kQ5_K);
}
BENCHMARK(BM_GemvHot_Q4_0)->Apply(GemvHotArgs);
BENCHMARK(BM_GemvHot_Q4_1)->Apply(GemvHotArgs);
BENCHMARK(BM_GemvHot_Q5_0)->Apply(GemvHotArgs);
BENCHMARK(BM_GemvHot_Q5_1)->Apply(GemvHotArgs);
BENCHMARK(BM_GemvHot_Q4_K)->Apply(GemvHotArgs);
BENCHMARK(BM_GemvHot_Q5_K)->Apply(GemvHotArgs);

}  // namespace
}  // namespace switchyard::runtime

BENCHMARK_MAIN();
