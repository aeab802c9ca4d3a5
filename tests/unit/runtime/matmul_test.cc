// MatMul on every ISA and weight dtype against a double-precision reference computed from
// the weights' decoded values. Tolerance: |got - want| <= 1e-4 * (1 + sum_t |x_t w_t|),
// an f32 accumulation bound that holds for any summation order.
#include <cmath>
#include <random>
#include <tuple>

#include "gtest/gtest.h"

#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::EncodeWeights;
using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;

struct MatMulCase {
  int64_t n, k, m;
};

class MatMulTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {};

void CheckMatMul(Backend& backend, DType dtype, const MatMulCase& c, bool with_bias,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<float> x = RandomFloats(rng, c.n * c.k);
  const std::vector<float> w_values = RandomFloats(rng, c.m * c.k);
  std::vector<float> bias = RandomFloats(rng, c.m);
  std::vector<float> w;
  std::vector<uint8_t> w_bytes = EncodeWeights(dtype, w_values, c.m, c.k, &w);
  std::vector<float> out(static_cast<size_t>(c.n * c.m), -7.0f);

  const Tensor xt = HostTensor(DType::kF32, {c.n, c.k}, const_cast<float*>(x.data()));
  const Tensor wt = HostTensor(dtype, {c.m, c.k}, w_bytes.data());
  const Tensor bt = HostTensor(DType::kF32, {c.m}, bias.data());
  const Tensor ot = HostTensor(DType::kF32, {c.n, c.m}, out.data());
  ASSERT_TRUE(backend.MatMul(xt, wt, with_bias ? &bt : nullptr, ot).ok());

  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t j = 0; j < c.m; ++j) {
      double want = with_bias ? bias[static_cast<size_t>(j)] : 0.0;
      double magnitude = 1.0;
      for (int64_t t = 0; t < c.k; ++t) {
        const double p = static_cast<double>(x[static_cast<size_t>(i * c.k + t)]) *
                         w[static_cast<size_t>(j * c.k + t)];
        want += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(out[static_cast<size_t>(i * c.m + j)], want, 1e-4 * magnitude)
          << "n=" << c.n << " k=" << c.k << " m=" << c.m << " at (" << i << ", " << j << ")";
    }
  }
}

TEST_P(MatMulTest, MatchesReference) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa);
  const bool q8 = dtype == DType::kQ8_0;
  std::vector<MatMulCase> cases = {
      {1, 32, 1},   {1, 64, 33},   {2, 96, 17},   {3, 32, 64},   {4, 64, 31},   {5, 160, 65},
      {7, 32, 100}, {13, 224, 40}, {64, 256, 96}, {300, 64, 33}, {1, 4096, 64}, {1, 128, 513},
  };
  if (!q8) {
    for (MatMulCase c : std::vector<MatMulCase>{{1, 1, 1},
                                                {1, 3, 5},
                                                {2, 33, 7},
                                                {5, 1, 9},
                                                {9, 3, 33},
                                                {17, 33, 70},
                                                {1, 4097, 3},
                                                {6, 4097, 2}}) {
      cases.push_back(c);
    }
  }
  uint32_t seed = 1;
  for (const MatMulCase& c : cases) {
    CheckMatMul(*backend, dtype, c, /*with_bias=*/seed % 2 == 0, seed);
    ++seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, MatMulTest,
                         ::testing::Combine(::testing::ValuesIn(testing::SupportedIsas()),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16, DType::kQ8_0)),
                         [](const auto& param_info) {
                           return std::string(CpuIsaName(std::get<0>(param_info.param))) + "_" +
                                  std::string(DTypeName(std::get<1>(param_info.param)));
                         });

TEST(MatMulValidationTest, RejectsBadShapes) {
  auto backend = MakeBackend(CpuIsa::kPortable, 1);
  float x[8] = {}, w[8] = {}, out[8] = {};
  const Tensor xt = HostTensor(DType::kF32, {2, 4}, x);
  const Tensor wt = HostTensor(DType::kF32, {2, 3}, w);
  const Tensor ot = HostTensor(DType::kF32, {2, 2}, out);
  EXPECT_EQ(backend->MatMul(xt, wt, nullptr, ot).code(), absl::StatusCode::kInvalidArgument);
  const Tensor xi = HostTensor(DType::kI32, {2, 4}, x);
  EXPECT_EQ(backend->MatMul(xi, xt.Reshaped({2, 4}), nullptr, ot).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->MatMul(xt, xt, nullptr, xt).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::runtime
