// GGML's quantized weight types (Q4_0 ... Q6_K, Q2_K, Q3_K): dequantisation and Embedding against a
// double-precision reference decoded independently (ggml_reference.h), and MatMul on every
// ISA, on the exact path (f32 activations) and the int8 path (activations quantized per
// block of 32), against sum_t x_t * w_t in double. Tolerances as in matmul_test.cc:
// 1e-4 * (1 + sum_t |x_t w_t|), plus sum_t |w_t| * 0.57 * s_b(t) on the int8 path (each
// activation moves by at most half its block's step s_b = max|x over block| / 127, plus
// the step's rounding to fp16, 127 * 2^-11 s_b).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "gtest/gtest.h"

#include "ggml_reference.h"
#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;
using testing::RandomGgmlRows;
using testing::RefDequantize;

TEST(GgmlQuantTest, BlockGeometryIsGgmls) {
  EXPECT_EQ(RowBytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(RowBytes(DType::kQ4_1, 64), 40u);
  EXPECT_EQ(RowBytes(DType::kQ5_0, 64), 44u);
  EXPECT_EQ(RowBytes(DType::kQ5_1, 64), 48u);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(DType::kQ5_K, 512), 352u);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 512), 420u);
  EXPECT_EQ(RowBytes(DType::kQ2_K, 512), 168u);
  EXPECT_EQ(RowBytes(DType::kQ3_K, 512), 220u);
  for (DType t : testing::kGgmlQuantTypes) {
    EXPECT_TRUE(IsGgmlQuantDType(t)) << DTypeName(t);
    EXPECT_TRUE(IsWeightDType(t));
  }
  EXPECT_FALSE(IsGgmlQuantDType(DType::kQ8_0));
  EXPECT_EQ(DTypeName(DType::kQ5_K), "Q5_K");
}

TEST(GgmlQuantTest, DequantizeRowMatchesReference) {
  std::mt19937 rng(7);
  for (DType t : testing::kGgmlQuantTypes) {
    const int64_t n = 1024;
    const std::vector<uint8_t> bytes = RandomGgmlRows(t, 1, n, rng);
    std::vector<float> got(n);
    DequantizeRow(t, bytes.data(), n, got.data());
    const std::vector<double> want = RefDequantize(t, bytes.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << DTypeName(t) << " " << i;
  }
}

class GgmlQuantKernelTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {};

TEST_P(GgmlQuantKernelTest, EmbeddingMatchesReference) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa);
  std::mt19937 rng(11);
  const int64_t vocab = 9, d = 512;
  std::vector<uint8_t> table = RandomGgmlRows(dtype, vocab, d, rng);
  std::vector<int32_t> ids = {3, 0, 8, 3};
  std::vector<float> out(ids.size() * d);
  ASSERT_TRUE(backend
                  ->Embedding(HostTensor(dtype, {vocab, d}, table.data()),
                              HostTensor(DType::kI32, {4}, ids.data()),
                              HostTensor(DType::kF32, {4, d}, out.data()))
                  .ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<double> want =
        RefDequantize(dtype, table.data() + ids[i] * RowBytes(dtype, d), d);
    for (int64_t t = 0; t < d; ++t)
      ASSERT_NEAR(out[i * d + t], want[t], 1e-6 * (1 + std::fabs(want[t])));
  }
}

struct Shape {
  int64_t n, k, m;
};

void CheckMatMul(Backend& backend, DType dtype, const Shape& c, bool quantized_x, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<float> x = RandomFloats(rng, c.n * c.k);
  const std::vector<uint8_t> w = RandomGgmlRows(dtype, c.m, c.k, rng);
  const std::vector<double> wd = RefDequantize(dtype, w.data(), c.m * c.k);
  std::vector<float> bias = RandomFloats(rng, c.m);
  const bool with_bias = seed % 2 == 0;
  std::vector<float> out(static_cast<size_t>(c.n * c.m), -7.0f);
  const Tensor bias_t = HostTensor(DType::kF32, {c.m}, bias.data());
  ASSERT_TRUE(backend
                  .MatMul(HostTensor(DType::kF32, {c.n, c.k}, const_cast<float*>(x.data())),
                          HostTensor(dtype, {c.m, c.k}, const_cast<uint8_t*>(w.data())),
                          with_bias ? &bias_t : nullptr,
                          HostTensor(DType::kF32, {c.n, c.m}, out.data()))
                  .ok());
  for (int64_t i = 0; i < c.n; ++i) {
    std::vector<double> step(static_cast<size_t>(c.k / 32));
    for (int64_t b = 0; b < c.k / 32; ++b) {
      float amax = 0.0f;
      for (int64_t u = 0; u < 32; ++u)
        amax = std::max(amax, std::fabs(x[i * c.k + 32 * b + u]));
      step[b] = amax / 127.0f;
    }
    for (int64_t j = 0; j < c.m; ++j) {
      double want = with_bias ? bias[j] : 0.0;
      double magnitude = 1.0;
      double x_rounding = 0.0;
      for (int64_t t = 0; t < c.k; ++t) {
        const double wt = wd[static_cast<size_t>(j * c.k + t)];
        const double p = x[i * c.k + t] * wt;
        want += p;
        magnitude += std::fabs(p);
        if (quantized_x)
          x_rounding += std::fabs(wt) * 0.57 * step[t / 32];
      }
      ASSERT_NEAR(out[i * c.m + j], want, 1e-4 * magnitude + x_rounding)
          << DTypeName(dtype) << " n=" << c.n << " k=" << c.k << " m=" << c.m << " at (" << i
          << ", " << j << ")";
    }
  }
}

std::vector<Shape> ShapesFor(DType dtype) {
  // n: decode (1-4), the streaming limits (16/17, 48/49), panels (33, 300); m: a partial
  // panel and rows that do not fill a thread's share.
  std::vector<Shape> shapes = {{1, 256, 1},   {1, 512, 33},  {2, 256, 17},  {3, 768, 64},
                               {4, 256, 31},  {5, 512, 65},  {16, 256, 70}, {17, 256, 70},
                               {33, 768, 45}, {48, 256, 35}, {49, 256, 35}, {300, 512, 33},
                               {1, 4096, 64}};
  // Decode shapes whose weight rows do not fill the GEMV's tiles of rows.
  shapes.push_back({3, 1024, 67});
  shapes.push_back({4, 512, 6});
  if (DTypeBlockElems(dtype) == 32) {
    // Rows that are not whole groups of 256: a short last group, odd chunk counts.
    for (Shape s : std::vector<Shape>{{1, 32, 5},
                                      {1, 96, 9},
                                      {3, 576, 40},
                                      {2, 1568, 13},
                                      {4, 352, 7},
                                      {7, 800, 19},
                                      {20, 160, 33},
                                      {64, 1568, 40}}) {
      shapes.push_back(s);
    }
  }
  return shapes;
}

TEST_P(GgmlQuantKernelTest, MatMulExactPathMatchesReference) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa);
  uint32_t seed = 1;
  for (const Shape& s : ShapesFor(dtype))
    CheckMatMul(*backend, dtype, s, /*quantized_x=*/false, seed++);
}

TEST_P(GgmlQuantKernelTest, MatMulInt8PathMatchesReferenceWithinActivationRounding) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa, 2, /*quantize_q8_0=*/true);
  uint32_t seed = 100;
  for (const Shape& s : ShapesFor(dtype))
    CheckMatMul(*backend, dtype, s, /*quantized_x=*/true, seed++);
}

// A row's result must not depend on how many rows share its MatMul (decode, a prefill chunk
// of 16, one of 512): the streaming and panel shapes see the same quantized activations, so
// they may differ only by f32 summation order (~1e-5 here; a wrong scale or min would
// be off by ~0.1).
TEST_P(GgmlQuantKernelTest, ShapesAgreeOnTheSameRow) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa, 2, /*quantize_q8_0=*/true);
  std::mt19937 rng(21);
  const int64_t k = 1536, m = 64, rows = 40;
  const std::vector<float> x = RandomFloats(rng, rows * k);
  std::vector<uint8_t> w = RandomGgmlRows(dtype, m, k, rng);
  std::vector<std::vector<float>> outs;
  for (int64_t n : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{40}}) {
    std::vector<float> out(static_cast<size_t>(n * m));
    ASSERT_TRUE(backend
                    ->MatMul(HostTensor(DType::kF32, {n, k}, const_cast<float*>(x.data())),
                             HostTensor(dtype, {m, k}, w.data()), nullptr,
                             HostTensor(DType::kF32, {n, m}, out.data()))
                    .ok());
    outs.push_back(out);
  }
  for (size_t v = 1; v < outs.size(); ++v) {
    for (int64_t j = 0; j < m; ++j)
      ASSERT_NEAR(outs[v][j], outs[0][j], 1e-4 + 1e-5 * std::fabs(outs[0][j]))
          << DTypeName(dtype) << " variant " << v << " col " << j;
  }
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < m; ++j)
      ASSERT_NEAR(outs[2][i * m + j], outs[1][i * m + j],
                  1e-4 + 1e-5 * std::fabs(outs[1][i * m + j]))
          << DTypeName(dtype) << " row " << i << " col " << j;
  }
}

// Decode spreads weight rows over the threads in tiles of rows and groups activation rows
// up to four: a result must not depend on either, so it is bit for bit the same at any
// thread count, and a row's dot products the same with or without other rows beside it.
TEST_P(GgmlQuantKernelTest, DecodeIsBitIdenticalAcrossThreadCounts) {
  const auto [isa, dtype] = GetParam();
  std::mt19937 rng(31);
  const int64_t k = DTypeBlockElems(dtype) == 32 ? 800 : 768, m = 67, rows = 5;
  const std::vector<float> x = RandomFloats(rng, rows * k);
  std::vector<uint8_t> w = RandomGgmlRows(dtype, m, k, rng);
  std::vector<float> single;
  for (int64_t n = 1; n <= rows; ++n) {
    std::vector<float> first;
    for (size_t threads : {1, 2, 3, 5}) {
      auto backend = MakeBackend(isa, threads, /*quantize_q8_0=*/true);
      std::vector<float> out(static_cast<size_t>(n * m));
      ASSERT_TRUE(backend
                      ->MatMul(HostTensor(DType::kF32, {n, k}, const_cast<float*>(x.data())),
                               HostTensor(dtype, {m, k}, w.data()), nullptr,
                               HostTensor(DType::kF32, {n, m}, out.data()))
                      .ok());
      if (first.empty()) {
        first = out;
        continue;
      }
      for (int64_t t = 0; t < n * m; ++t)
        ASSERT_EQ(out[t], first[t])
            << DTypeName(dtype) << " n=" << n << " threads=" << threads << " at " << t;
    }
    if (n == 1)
      single = first;
    if (n > 1 && n <= 4) {
      for (int64_t j = 0; j < m; ++j)
        ASSERT_EQ(first[j], single[j]) << DTypeName(dtype) << " n=" << n << " col " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GgmlQuantKernelTest,
                         ::testing::Combine(::testing::ValuesIn(testing::SupportedIsas()),
                                            ::testing::ValuesIn(testing::kGgmlQuantTypes)),
                         [](const auto& param_info) {
                           return std::string(CpuIsaName(std::get<0>(param_info.param))) + "_" +
                                  std::string(DTypeName(std::get<1>(param_info.param)));
                         });

}  // namespace
}  // namespace switchyard::runtime
