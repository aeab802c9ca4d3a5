// MoeRoute and MoeScatterAdd against naive double-precision references: routing picks the
// same experts in the same order with weights within 1e-6, and the scatter sums each
// token's weighted expert rows.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "gtest/gtest.h"

#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;

TEST(MoeOpsTest, RouteMatchesSoftmaxTopK) {
  auto backend = MakeBackend(CpuIsa::kPortable);
  std::mt19937 rng(11);
  const int64_t n = 37, experts = 8, top_k = 3;
  std::vector<float> logits = RandomFloats(rng, n * experts, -4.0f, 4.0f);
  for (const bool normalize : {false, true}) {
    std::vector<int32_t> ids(n * top_k);
    std::vector<float> weights(n * top_k);
    ASSERT_TRUE(backend
                    ->MoeRoute(HostTensor(DType::kF32, {n, experts}, logits.data()), top_k,
                               normalize, HostTensor(DType::kI32, {n, top_k}, ids.data()),
                               HostTensor(DType::kF32, {n, top_k}, weights.data()))
                    .ok());
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> p(experts);
      double sum = 0;
      for (int64_t e = 0; e < experts; ++e)
        sum += p[e] = std::exp(static_cast<double>(logits[i * experts + e]));
      for (double& v : p)
        v /= sum;
      std::vector<int> order(experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
      double picked = 0;
      for (int64_t k = 0; k < top_k; ++k)
        picked += p[order[k]];
      for (int64_t k = 0; k < top_k; ++k) {
        ASSERT_EQ(ids[i * top_k + k], order[k]) << i;
        const double want = normalize ? p[order[k]] / picked : p[order[k]];
        ASSERT_NEAR(weights[i * top_k + k], want, 1e-6);
      }
    }
  }
  std::vector<int32_t> ids(n * 9);
  std::vector<float> weights(n * 9);
  EXPECT_EQ(backend
                ->MoeRoute(HostTensor(DType::kF32, {n, experts}, logits.data()), 9, true,
                           HostTensor(DType::kI32, {n, 9}, ids.data()),
                           HostTensor(DType::kF32, {n, 9}, weights.data()))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MoeOpsTest, ScatterAddSumsWeightedRowsPerToken) {
  auto backend = MakeBackend(CpuIsa::kPortable, /*threads=*/3);
  std::mt19937 rng(12);
  const int64_t n = 5, m = 9, d = 70;
  std::vector<float> y = RandomFloats(rng, m * d);
  std::vector<float> w = RandomFloats(rng, m, 0.0f, 1.0f);
  std::vector<int32_t> rows = {4, 0, 2, 0, 4, 2, 0, 4, 2};  // token 1 and 3 get nothing
  std::vector<float> out(n * d, 123.0f);
  ASSERT_TRUE(backend
                  ->MoeScatterAdd(HostTensor(DType::kF32, {m, d}, y.data()),
                                  HostTensor(DType::kI32, {m}, rows.data()),
                                  HostTensor(DType::kF32, {m}, w.data()),
                                  HostTensor(DType::kF32, {n, d}, out.data()))
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < d; ++c) {
      double want = 0;
      for (int64_t j = 0; j < m; ++j) {
        if (rows[j] == i)
          want += static_cast<double>(w[j]) * y[j * d + c];
      }
      ASSERT_NEAR(out[i * d + c], want, 1e-6) << i << "," << c;
    }
  }
  rows[3] = 5;
  EXPECT_EQ(backend
                ->MoeScatterAdd(HostTensor(DType::kF32, {m, d}, y.data()),
                                HostTensor(DType::kI32, {m}, rows.data()),
                                HostTensor(DType::kF32, {m}, w.data()),
                                HostTensor(DType::kF32, {n, d}, out.data()))
                .code(),
            absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace switchyard::runtime
