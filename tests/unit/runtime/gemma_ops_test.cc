// GeluTanhGlu, Scale and SoftCap against double-precision references (1e-6 relative: the
// kernels are f32 evaluations of the same formulas), in place and out of place, with the
// shape and argument checks the Backend contract promises.
#include <cmath>
#include <random>

#include "gtest/gtest.h"

#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;

double GeluTanh(double g) {
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
}

void ExpectNearRelative(float got, double want) {
  ASSERT_NEAR(got, want, 1e-6 * (1 + std::fabs(want)));
}

TEST(GemmaOpsTest, GeluTanhGluMatchesFormula) {
  auto backend = MakeBackend(CpuIsa::kPortable);
  std::mt19937 rng(7);
  for (int64_t count : {1, 5, 64, 70001}) {
    std::vector<float> gate = RandomFloats(rng, count, -10.0f, 10.0f);
    std::vector<float> up = RandomFloats(rng, count);
    std::vector<float> out(static_cast<size_t>(count));
    ASSERT_TRUE(backend
                    ->GeluTanhGlu(HostTensor(DType::kF32, {count}, gate.data()),
                                  HostTensor(DType::kF32, {1, count}, up.data()),
                                  HostTensor(DType::kF32, {count}, out.data()))
                    .ok());
    for (size_t t = 0; t < out.size(); ++t)
      ExpectNearRelative(out[t], GeluTanh(gate[t]) * up[t]);
    // In place over gate gives the same values.
    const Tensor gt = HostTensor(DType::kF32, {count}, gate.data());
    ASSERT_TRUE(backend->GeluTanhGlu(gt, HostTensor(DType::kF32, {count}, up.data()), gt).ok());
    for (size_t t = 0; t < out.size(); ++t)
      ASSERT_EQ(gate[t], out[t]);
  }
  // GELU is not SiLU: a kernel that ran SwiGlu would fail here (silu(1) = 0.731).
  float g = 1.0f, u = 1.0f, o = 0.0f;
  ASSERT_TRUE(backend
                  ->GeluTanhGlu(HostTensor(DType::kF32, {1}, &g), HostTensor(DType::kF32, {1}, &u),
                                HostTensor(DType::kF32, {1}, &o))
                  .ok());
  EXPECT_NEAR(o, 0.841192, 1e-6);
}

TEST(GemmaOpsTest, ScaleAndSoftCap) {
  auto backend = MakeBackend(CpuIsa::kPortable);
  std::mt19937 rng(8);
  const int64_t count = 4099;
  std::vector<float> x = RandomFloats(rng, count, -200.0f, 200.0f);
  const std::vector<float> x0 = x;
  const Tensor xt = HostTensor(DType::kF32, {count}, x.data());
  ASSERT_TRUE(backend->Scale(xt, 8.0f, xt).ok());
  for (size_t t = 0; t < x.size(); ++t)
    ASSERT_EQ(x[t], x0[t] * 8.0f);

  std::vector<float> capped(x.size());
  ASSERT_TRUE(backend->SoftCap(xt, 30.0f, HostTensor(DType::kF32, {count}, capped.data())).ok());
  for (size_t t = 0; t < x.size(); ++t) {
    ExpectNearRelative(capped[t], 30.0 * std::tanh(static_cast<double>(x[t]) / 30.0));
    ASSERT_LE(std::fabs(capped[t]), 30.0f);
  }
  EXPECT_EQ(backend->SoftCap(xt, 0.0f, xt).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->SoftCap(xt, -1.0f, xt).code(), absl::StatusCode::kInvalidArgument);
  float small[3] = {};
  EXPECT_EQ(backend->Scale(xt, 2.0f, HostTensor(DType::kF32, {3}, small)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend
                ->GeluTanhGlu(xt, HostTensor(DType::kF32, {3}, small),
                              HostTensor(DType::kF32, {3}, small))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::runtime
