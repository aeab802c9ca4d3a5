// CPU backend MatMul throughput next to the machine's own memory bandwidth, in one binary
// so the ratio is visible in one run:
//   BM_StreamRead: sums a 512 MiB array on all threads (the bandwidth a GEMV can hope for).
//   BM_Gemv/<dtype>: [1, k] x [m, k]^T at Llama-3.2-1B shapes; bytes_per_second counts
//     weight bytes streamed, so compare it with BM_StreamRead.
//   BM_Gemm/<dtype>: n = 512 prefill rows; items_per_second counts flops (2 n m k).
// Kernel level from SY_CPU_ISA (portable|avx2|avx512), default the best the CPU has.
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/thread_pool.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/float16.h"

namespace switchyard::runtime {
namespace {

Backend& SharedBackend() {
  static std::unique_ptr<Backend> backend = [] {
    auto made = CreateCpuBackend();
    if (!made.ok())
      std::abort();
    return std::move(made).value();
  }();
  return *backend;
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

void RunMatMul(benchmark::State& state, DType dtype, int64_t n) {
  const int64_t k = state.range(0);
  const int64_t m = state.range(1);
  Backend& backend = SharedBackend();
  std::vector<uint8_t> w = RandomWeights(dtype, m, k);
  std::vector<float> x(static_cast<size_t>(n * k), 0.5f);
  std::vector<float> out(static_cast<size_t>(n * m));
  const Tensor xt(DType::kF32, {n, k}, x.data(), MemorySpace::kHost);
  const Tensor wt(dtype, {m, k}, w.data(), MemorySpace::kHost);
  const Tensor ot(DType::kF32, {n, m}, out.data(), MemorySpace::kHost);
  for (auto _ : state) {
    if (!backend.MatMul(xt, wt, nullptr, ot).ok())
      state.SkipWithError("MatMul failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  state.SetItemsProcessed(state.iterations() * 2 * n * m * k);
  state.SetLabel(std::string(backend.name()));
}

void BM_StreamRead(benchmark::State& state) {
  const size_t bytes = size_t{512} << 20;
  const size_t count = bytes / sizeof(float);
  std::vector<float> data(count, 1.0f);
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  base::ThreadPool pool(threads, "bench-stream");
  std::vector<double> sums(threads);
  for (auto _ : state) {
    pool.ParallelFor(threads, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) {
        const size_t lo = count * t / threads;
        const size_t hi = count * (t + 1) / threads;
        float acc[16] = {};
        for (size_t i = lo; i + 16 <= hi; i += 16) {
          for (size_t l = 0; l < 16; ++l)
            acc[l] += data[i + l];
        }
        float s = 0;
        for (float a : acc)
          s += a;
        sums[t] = s;
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
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

// Llama-3.2-1B: hidden 2048, intermediate 8192, vocab 128256 (lm_head rows cut to 32768).
void GemvShapes(benchmark::internal::Benchmark* b) {
  b->Args({2048, 8192})->Args({8192, 2048})->Args({2048, 2048})->Args({2048, 32768});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
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
BENCHMARK(BM_Gemv_F32)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_BF16)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_F16)->Apply(GemvShapes);
BENCHMARK(BM_Gemv_Q8_0)->Apply(GemvShapes);

void BM_Gemm512_F32(benchmark::State& s) {
  RunMatMul(s, DType::kF32, 512);
}
void BM_Gemm512_BF16(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, 512);
}
void BM_Gemm512_Q8_0(benchmark::State& s) {
  RunMatMul(s, DType::kQ8_0, 512);
}
BENCHMARK(BM_Gemm512_F32)->Args({2048, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gemm512_BF16)->Args({2048, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gemm512_Q8_0)->Args({2048, 2048})->Unit(benchmark::kMillisecond)->UseRealTime();

// Few-row crossover between the streaming and the packed-panel paths.
void BM_SmallBatch_BF16(benchmark::State& s) {
  RunMatMul(s, DType::kBF16, s.range(2));
}
BENCHMARK(BM_SmallBatch_BF16)
    ->Args({2048, 2048, 2})
    ->Args({2048, 2048, 3})
    ->Args({2048, 2048, 4})
    ->Args({2048, 2048, 8})
    ->Args({2048, 2048, 16})
    ->Args({2048, 2048, 17})
    ->Args({2048, 2048, 32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace switchyard::runtime

BENCHMARK_MAIN();
