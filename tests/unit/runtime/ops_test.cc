// Embedding, RmsNorm, Rope, SwiGlu and Add on every ISA against double-precision
// references. Tolerances: 1e-6 relative for exact-in-f32 gathers, 1e-5 relative for
// RmsNorm/SwiGlu, 2e-5 absolute for Rope on positions up to 5000 (angles from double).
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>

#include "gtest/gtest.h"

#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::EncodeWeights;
using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;

class OpsTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override { backend_ = MakeBackend(GetParam()); }
  std::unique_ptr<Backend> backend_;
};

TEST_P(OpsTest, EmbeddingAllDTypes) {
  std::mt19937 rng(1);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
    const int64_t vocab = 37;
    const int64_t d = dtype == DType::kQ8_0 ? 64 : 33;
    std::vector<float> decoded;
    std::vector<uint8_t> table =
        EncodeWeights(dtype, RandomFloats(rng, vocab * d), vocab, d, &decoded);
    std::vector<int32_t> ids = {0, 36, 5, 5, 17};
    std::vector<float> out(ids.size() * static_cast<size_t>(d));
    ASSERT_TRUE(backend_
                    ->Embedding(HostTensor(dtype, {vocab, d}, table.data()),
                                HostTensor(DType::kI32, {5}, ids.data()),
                                HostTensor(DType::kF32, {5, d}, out.data()))
                    .ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int64_t t = 0; t < d; ++t) {
        ASSERT_EQ(out[i * static_cast<size_t>(d) + static_cast<size_t>(t)],
                  decoded[static_cast<size_t>(ids[i] * d + t)]);
      }
    }
    ids[2] = 37;
    EXPECT_EQ(backend_
                  ->Embedding(HostTensor(dtype, {vocab, d}, table.data()),
                              HostTensor(DType::kI32, {5}, ids.data()),
                              HostTensor(DType::kF32, {5, d}, out.data()))
                  .code(),
              absl::StatusCode::kOutOfRange);
  }
}

TEST_P(OpsTest, RmsNormInPlaceAndWeightDTypes) {
  std::mt19937 rng(2);
  for (DType wdtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto [n, d] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {1, 2048}, {9, 4097}}) {
      std::vector<float> x = RandomFloats(rng, n * d, -3.0f, 3.0f);
      const std::vector<float> x0 = x;
      std::vector<float> w;
      std::vector<uint8_t> w_bytes = EncodeWeights(wdtype, RandomFloats(rng, d), 1, d, &w);
      const float eps = 1e-5f;
      const Tensor xt = HostTensor(DType::kF32, {n, d}, x.data());
      ASSERT_TRUE(backend_->RmsNorm(xt, HostTensor(wdtype, {d}, w_bytes.data()), eps, xt).ok());
      for (int64_t i = 0; i < n; ++i) {
        double ss = 0;
        for (int64_t t = 0; t < d; ++t)
          ss += std::pow(x0[static_cast<size_t>(i * d + t)], 2);
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
        for (int64_t t = 0; t < d; ++t) {
          const double want = x0[static_cast<size_t>(i * d + t)] * inv * w[static_cast<size_t>(t)];
          ASSERT_NEAR(x[static_cast<size_t>(i * d + t)], want, 1e-5 * (1 + std::fabs(want)));
        }
      }
    }
  }
}

// Reference rotation: pair (lo, hi) at angle pos * inv_freq[j], inv_freq built from the
// HF formulas directly.
void CheckRope(Backend& backend, const RopeParams& params, int64_t heads, int64_t n,
               uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t hd = params.head_dim;
  const int64_t rot = params.rotary_dim == 0 ? hd : params.rotary_dim;
  const int64_t half = rot / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    double f = 1.0 / std::pow(params.theta, static_cast<double>(2 * j) / static_cast<double>(rot));
    if (params.scaling == RopeScalingType::kLinear)
      f /= params.factor;
    if (params.scaling == RopeScalingType::kLlama3) {
      const double wavelen = 2 * std::numbers::pi / f;
      const double old = static_cast<double>(params.original_max_position_embeddings);
      if (wavelen > old / params.low_freq_factor) {
        f /= params.factor;
      } else if (wavelen >= old / params.high_freq_factor) {
        const double sm = (old / wavelen - params.low_freq_factor) /
                          (params.high_freq_factor - params.low_freq_factor);
        f = (1 - sm) * f / params.factor + sm * f;
      }
    }
    if (!params.freq_factors.empty())
      f /= params.freq_factors[static_cast<size_t>(j)];
    inv[static_cast<size_t>(j)] = f;
  }
  std::vector<float> x = RandomFloats(rng, n * heads * hd);
  const std::vector<float> x0 = x;
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::uniform_int_distribution<int32_t> pos_dist(0, 5000);
  for (int32_t& p : pos)
    p = pos_dist(rng);
  pos[0] = 0;
  auto table = backend.CreateRopeTable(params);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_TRUE(backend
                  .Rope(**table, HostTensor(DType::kF32, {n, heads, hd}, x.data()),
                        HostTensor(DType::kI32, {n}, pos.data()))
                  .ok());
  const bool inter = params.style == RopeStyle::kInterleaved;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      const size_t base = static_cast<size_t>((i * heads + h) * hd);
      std::vector<double> want(x0.begin() + static_cast<std::ptrdiff_t>(base),
                               x0.begin() + static_cast<std::ptrdiff_t>(base + hd));
      for (int64_t j = 0; j < half; ++j) {
        const size_t lo = static_cast<size_t>(inter ? 2 * j : j);
        const size_t hi = static_cast<size_t>(inter ? 2 * j + 1 : j + half);
        const double a = pos[static_cast<size_t>(i)] * inv[static_cast<size_t>(j)];
        want[lo] = x0[base + lo] * std::cos(a) - x0[base + hi] * std::sin(a);
        want[hi] = x0[base + hi] * std::cos(a) + x0[base + lo] * std::sin(a);
      }
      for (int64_t t = 0; t < hd; ++t) {
        ASSERT_NEAR(x[base + static_cast<size_t>(t)], want[static_cast<size_t>(t)], 2e-5)
            << "row " << i << " head " << h << " dim " << t;
      }
    }
  }
}

TEST_P(OpsTest, RopeVariants) {
  RopeParams plain{.head_dim = 64, .theta = 500000.0};
  CheckRope(*backend_, plain, 4, 7, 1);
  CheckRope(*backend_, {.head_dim = 2, .theta = 10000.0}, 1, 1, 2);
  CheckRope(*backend_, {.head_dim = 6, .rotary_dim = 4, .theta = 10000.0}, 3, 5, 3);
  CheckRope(*backend_, {.head_dim = 32, .style = RopeStyle::kInterleaved}, 2, 9, 4);
  CheckRope(*backend_, {.head_dim = 16, .scaling = RopeScalingType::kLinear, .factor = 4.0}, 2, 3,
            5);
  RopeParams llama3{.head_dim = 128,
                    .theta = 500000.0,
                    .scaling = RopeScalingType::kLlama3,
                    .factor = 32.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = 8192};
  CheckRope(*backend_, llama3, 2, 33, 6);
  RopeParams with_factors{.head_dim = 8, .theta = 10000.0};
  with_factors.freq_factors = {1.0f, 2.0f, 4.0f, 8.0f};
  CheckRope(*backend_, with_factors, 2, 4, 7);
}

TEST(RopeParamsTest, RejectsBadParams) {
  EXPECT_FALSE(RopeInverseFrequencies({.head_dim = 0}).ok());
  EXPECT_FALSE(RopeInverseFrequencies({.head_dim = 8, .rotary_dim = 3}).ok());
  EXPECT_FALSE(RopeInverseFrequencies({.head_dim = 8, .theta = -1}).ok());
  RopeParams bad_factors{.head_dim = 8};
  bad_factors.freq_factors = {1.0f};
  EXPECT_FALSE(RopeInverseFrequencies(bad_factors).ok());
}

TEST_P(OpsTest, SwiGluAndAdd) {
  std::mt19937 rng(3);
  for (int64_t count : {1, 7, 33, 70001}) {
    std::vector<float> gate = RandomFloats(rng, count, -8.0f, 8.0f);
    // Where a vector exp must clamp: e^-g overflows or underflows f32.
    const float extremes[] = {-1000.0f, -100.0f, -88.5f, 88.5f, 100.0f, 1000.0f};
    for (size_t i = 0; i < std::size(extremes) && i < gate.size(); ++i)
      gate[i * gate.size() / std::size(extremes)] = extremes[i];
    std::vector<float> up = RandomFloats(rng, count);
    const std::vector<float> gate0 = gate;
    const Tensor gt = HostTensor(DType::kF32, {count}, gate.data());
    const Tensor ut = HostTensor(DType::kF32, {1, count}, up.data());
    ASSERT_TRUE(backend_->SwiGlu(gt, ut, gt).ok());
    for (size_t t = 0; t < gate.size(); ++t) {
      const double g = gate0[t];
      const double want = g / (1 + std::exp(-g)) * up[t];
      ASSERT_NEAR(gate[t], want, 1e-5 * (1 + std::fabs(want)));
    }
    const std::vector<float> up0 = up;
    ASSERT_TRUE(backend_->Add(ut, gt, ut).ok());
    for (size_t t = 0; t < up.size(); ++t)
      ASSERT_EQ(up[t], up0[t] + gate[t]);
  }
  float a[2] = {}, b[3] = {};
  EXPECT_EQ(backend_
                ->Add(HostTensor(DType::kF32, {2}, a), HostTensor(DType::kF32, {3}, b),
                      HostTensor(DType::kF32, {2}, a))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(OpsTest, BuffersAndCopies) {
  auto buffer = backend_->Allocate(100);
  ASSERT_TRUE(buffer.ok());
  const Tensor t = buffer->View(DType::kF32, {5, 5});
  std::vector<float> host(25), back(25);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<float>(i);
  ASSERT_TRUE(backend_->CopyToDevice(host.data(), t).ok());
  auto other = backend_->Allocate(100);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(backend_->Copy(t, other->View(DType::kF32, {25})).ok());
  ASSERT_TRUE(backend_->Synchronize().ok());
  ASSERT_TRUE(backend_->CopyToHost(other->View(DType::kF32, {25}), back.data()).ok());
  EXPECT_EQ(host, back);
  auto wrapped = backend_->WrapHost(host.data(), 100);
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(wrapped->data(), host.data());
  Buffer moved = std::move(*buffer);
  EXPECT_EQ(moved.size_bytes(), 100u);
}

// The vectorized f32 -> F16/BF16 conversions of WriteKv round exactly like the scalar
// F32ToF16/F32ToBf16: ties, subnormals, overflow, infinities, and (BF16) NaN. Rope's
// cached table gives the same result for a position before and after the table grows.
TEST_P(OpsTest, HalfPoolWritesRoundExactly) {
  std::mt19937 rng(11);
  std::vector<float> values = RandomFloats(rng, 200, -70000.0f, 70000.0f);
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f800fffu, 0x00000001u, 0x80000007u,
                        0x387fc000u, 0x33000000u, 0x477ff000u, 0x477fefffu, 0x7f800000u,
                        0xff800000u, 0x7f7fffffu, 0x00400000u, 0x3a7ff000u, 0x3a800800u}) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    values.push_back(f);
  }
  values.resize(224, 0.5f);  // [4 rows, 2 kv heads, 28].
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> k_pool(2 * 4 * 56), v_pool(k_pool.size());
    std::vector<int32_t> slots = {3, 0, 6, 5};
    ASSERT_TRUE(backend_
                    ->WriteKv(HostTensor(DType::kF32, {4, 2, 28}, values.data()),
                              HostTensor(DType::kF32, {4, 2, 28}, values.data()),
                              HostTensor(DType::kI32, {4}, slots.data()),
                              HostTensor(dtype, {2, 4, 2, 28}, k_pool.data()),
                              HostTensor(dtype, {2, 4, 2, 28}, v_pool.data()))
                    .ok());
    for (size_t i = 0; i < 4; ++i) {
      for (size_t t = 0; t < 56; ++t) {
        const float f = values[i * 56 + t];
        const uint16_t want = dtype == DType::kF16 ? F32ToF16(f) : F32ToBf16(f);
        ASSERT_EQ(k_pool[static_cast<size_t>(slots[i]) * 56 + t], want)
            << DTypeName(dtype) << " value " << f;
        ASSERT_EQ(v_pool[static_cast<size_t>(slots[i]) * 56 + t], want);
      }
    }
  }
  std::vector<float> nan_row(32, std::numeric_limits<float>::quiet_NaN());
  std::vector<uint16_t> pool(2 * 32);
  int32_t slot = 1;
  ASSERT_TRUE(backend_
                  ->WriteKv(HostTensor(DType::kF32, {1, 1, 32}, nan_row.data()),
                            HostTensor(DType::kF32, {1, 1, 32}, nan_row.data()),
                            HostTensor(DType::kI32, {1}, &slot),
                            HostTensor(DType::kBF16, {2, 1, 1, 32}, pool.data()),
                            HostTensor(DType::kBF16, {2, 1, 1, 32}, pool.data()))
                  .ok());
  EXPECT_EQ(pool[32], F32ToBf16(nan_row[0]));
  EXPECT_EQ(pool[63], F32ToBf16(nan_row[0]));
}

TEST_P(OpsTest, RopeTableGrowthKeepsValues) {
  auto table = backend_->CreateRopeTable({.head_dim = 8, .theta = 10000.0});
  ASSERT_TRUE(table.ok());
  std::vector<float> first(8, 1.0f), second(16, 1.0f);
  int32_t pos = 7;
  ASSERT_TRUE(backend_
                  ->Rope(**table, HostTensor(DType::kF32, {1, 1, 8}, first.data()),
                         HostTensor(DType::kI32, {1}, &pos))
                  .ok());
  std::vector<int32_t> positions = {5000, 7};
  ASSERT_TRUE(backend_
                  ->Rope(**table, HostTensor(DType::kF32, {2, 1, 8}, second.data()),
                         HostTensor(DType::kI32, {2}, positions.data()))
                  .ok());
  for (size_t t = 0; t < 8; ++t)
    EXPECT_EQ(first[t], second[8 + t]);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, OpsTest, ::testing::ValuesIn(testing::SupportedIsas()),
                         testing::IsaParamName);

TEST(CpuBackendTest, IsaSelection) {
  EXPECT_EQ(ParseCpuIsa("avx2"), CpuIsa::kAvx2);
  EXPECT_FALSE(ParseCpuIsa("sse9").has_value());
  EXPECT_TRUE(CpuSupportsIsa(CpuIsa::kPortable));
  auto backend = CreateCpuBackend({.num_threads = 1, .isa = CpuIsa::kPortable});
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ((*backend)->name(), "cpu(portable, 1 threads)");
}

}  // namespace
}  // namespace switchyard::runtime
