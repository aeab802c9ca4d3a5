// MatMul on every ISA and weight dtype against a double-precision reference computed from
// the weights' decoded values. Tolerance: |got - want| <= 1e-4 * (1 + sum_t |x_t w_t|),
// an f32 accumulation bound that holds for any summation order.
// Q8_0 with quantized activations (the int8 path) adds the activations' rounding error:
// each x_t moves by at most half its block's step s_b = max|x over block| / 127, plus the
// step's rounding to fp16 (as llama.cpp stores it) times the largest int8 value,
// 127 * 2^-11 s_b; so the bound grows by sum_t |w_t| * 0.57 * s_b(t) (with slack).
// BF16 with activations rounded to bf16 (the AVX512_BF16 path): each x_t moves by at most
// 2^-9 of itself, so the bound grows by sum_t |x_t w_t| * 2^-8 (twice that, for slack).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

#include "ggml_reference.h"
#include "runtime/float16.h"
#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::EncodeWeights;
using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;
using testing::RandomGgmlRows;

struct MatMulCase {
  int64_t n, k, m;
};

class MatMulTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {};

std::string IsaDTypeName(const ::testing::TestParamInfo<std::tuple<CpuIsa, DType>>& info) {
  return std::string(CpuIsaName(std::get<0>(info.param))) + "_" +
         std::string(DTypeName(std::get<1>(info.param)));
}

// How the kernels may have rounded the activations before multiplying.
enum class XRounding { kNone, kQ8_0Blocks, kBf16 };

// Whether the backend runs BF16 weights on bf16 dot products (and so packs them).
bool HasBf16Dot(const Backend& backend) {
  return backend.name().find("+bf16") != std::string_view::npos;
}

// Whether the backend runs Q8_0 weights on int8 panels (AVX-512 VNNI; and so packs them).
bool HasQ8Panels(const Backend& backend) {
  return backend.name().find("+vnni") != std::string_view::npos;
}

// Bytes of the packed copy of a [m, k] weight where the backend packs it, else 0.
size_t PackedBytes(const Backend& backend, DType dtype, int64_t m, int64_t k) {
  const auto panels = static_cast<size_t>((m + 31) / 32);
  if (dtype == DType::kBF16 && HasBf16Dot(backend) && k % 2 == 0)
    return panels * 32 * static_cast<size_t>(k) * 2;  // bf16 pairs
  if (dtype == DType::kQ8_0 && HasQ8Panels(backend))
    return panels * static_cast<size_t>(k / 32) * (32 * 32 + 32 * 2 + 32 * 2);  // + fp16, int16
  return 0;
}

// `pack`: the weight is packed first (Backend::PackMatMulWeights), as a model's are.
void CheckMatMul(Backend& backend, DType dtype, const MatMulCase& c, bool with_bias, uint32_t seed,
                 XRounding x_rounded = XRounding::kNone, MatMulPath path = MatMulPath::kAuto,
                 bool pack = false) {
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
  Buffer packed;
  if (pack) {
    absl::StatusOr<Buffer> made = backend.PackMatMulWeights(std::span<const Tensor>(&wt, 1));
    ASSERT_TRUE(made.ok()) << made.status();
    packed = std::move(made).value();
    // Whole panels of 32 rows over all of k (rounded to 64 bytes).
    const size_t want = (PackedBytes(backend, dtype, c.m, c.k) + 63) / 64 * 64;
    ASSERT_EQ(packed.size_bytes(), want) << "k=" << c.k << " m=" << c.m;
    EXPECT_EQ(backend.PackedMatMulWeightBytes(dtype, c.m, c.k), want);
    if (want != 0)
      EXPECT_FALSE(backend.MatMulPathsDiffer(wt, c.n));
  }
  ASSERT_TRUE(backend.MatMulOnPath(xt, wt, with_bias ? &bt : nullptr, ot, path).ok());

  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t j = 0; j < c.m; ++j) {
      double want = with_bias ? bias[static_cast<size_t>(j)] : 0.0;
      double magnitude = 1.0;
      double x_rounding = 0.0;
      for (int64_t t = 0; t < c.k; ++t) {
        const double p = static_cast<double>(x[static_cast<size_t>(i * c.k + t)]) *
                         w[static_cast<size_t>(j * c.k + t)];
        want += p;
        magnitude += std::fabs(p);
        if (x_rounded == XRounding::kBf16)
          x_rounding += std::fabs(p) * 0x1p-8;
        if (x_rounded == XRounding::kQ8_0Blocks) {
          const int64_t b0 = t / 32 * 32;
          float amax = 0.0f;
          for (int64_t u = b0; u < b0 + 32; ++u)
            amax = std::max(amax, std::fabs(x[static_cast<size_t>(i * c.k + u)]));
          x_rounding += std::fabs(w[static_cast<size_t>(j * c.k + t)]) * 0.57 * (amax / 127.0f);
        }
      }
      ASSERT_NEAR(out[static_cast<size_t>(i * c.m + j)], want, 1e-4 * magnitude + x_rounding)
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
                                                {48, 33, 35},
                                                {49, 33, 35},
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

// Q8_0 weights on the int8 path (activations quantized per block of 32), where the CPU
// has one; other ISAs fall back to the exact path, which meets the same bound.
class QuantizedMatMulTest : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(QuantizedMatMulTest, MatchesReferenceWithinActivationRounding) {
  auto backend = MakeBackend(GetParam(), 2, /*quantize_q8_0=*/true);
  const std::vector<MatMulCase> cases = {
      {1, 32, 1},    {1, 64, 33},   {2, 96, 17},   {3, 32, 64},  {4, 64, 31},   {5, 160, 65},
      {7, 32, 100},  {13, 224, 40}, {16, 96, 70},  {17, 96, 70}, {64, 256, 96}, {300, 64, 33},
      {1, 4096, 64}, {1, 128, 513}, {33, 640, 45}, {9, 2048, 9}, {48, 64, 35},  {49, 64, 35},
  };
  uint32_t seed = 100;
  for (const MatMulCase& c : cases) {
    CheckMatMul(*backend, DType::kQ8_0, c, /*with_bias=*/seed % 2 == 0, seed,
                XRounding::kQ8_0Blocks);
    ++seed;
  }
  // Zero and constant blocks: a zero scale must not divide by zero.
  std::vector<float> x(64, 0.0f), out(2, -1.0f);
  std::fill(x.begin() + 32, x.end(), 0.25f);
  std::vector<float> decoded;
  std::vector<uint8_t> w =
      testing::EncodeWeights(DType::kQ8_0, std::vector<float>(128, 0.5f), 2, 64, &decoded);
  ASSERT_TRUE(backend
                  ->MatMul(HostTensor(DType::kF32, {1, 64}, x.data()),
                           HostTensor(DType::kQ8_0, {2, 64}, w.data()), nullptr,
                           HostTensor(DType::kF32, {1, 2}, out.data()))
                  .ok());
  // The constant block's step, 0.25 / 127, is rounded to fp16 (relative error <= 2^-11).
  EXPECT_NEAR(out[0], 32 * 0.25 * decoded[0], 32 * 0.25 * decoded[0] * 0x1p-11);
  EXPECT_NEAR(out[1], 32 * 0.25 * decoded[0], 32 * 0.25 * decoded[0] * 0x1p-11);
}

// BF16 weights with activations rounded to bf16, where the CPU has AVX512_BF16; other
// ISAs keep the exact path, which meets the same bound.
class Bf16DotMatMulTest : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(Bf16DotMatMulTest, MatchesReferenceWithinActivationRounding) {
  auto backend = MakeBackend(GetParam(), 2, /*quantize_q8_0=*/false, /*round_bf16=*/true);
  // Odd k (a zero-padded last pair), k past one 512-column panel block, n past the
  // streaming limit and past one 12-row tile, m not a multiple of 32.
  const std::vector<MatMulCase> cases = {
      {1, 1, 1},     {1, 3, 5},     {2, 33, 7},     {3, 64, 64},   {4, 65, 31},
      {5, 160, 65},  {7, 32, 100},  {16, 96, 70},   {17, 96, 70},  {17, 1, 9},
      {24, 33, 40},  {64, 256, 96}, {300, 64, 33},  {1, 4096, 64}, {1, 128, 513},
      {33, 640, 45}, {9, 2048, 9},  {40, 1031, 37}, {13, 4097, 3}, {29, 1024, 64},
  };
  uint32_t seed = 200;
  for (const MatMulCase& c : cases) {
    CheckMatMul(*backend, DType::kBF16, c, /*with_bias=*/seed % 2 == 0, seed, XRounding::kBf16);
    ++seed;
  }
}

// BF16 activations (Backend::MatMulTakesBf16Activations): where the backend rounds F32
// activations to bf16 for BF16 weights, rows it is given already rounded give the same
// bits on every path, packed or not; elsewhere, and for other weights, they are refused.
TEST(Bf16ActivationsTest, RoundedRowsGiveWhatF32RowsGive) {
  auto backend = MakeBackend(BestCpuIsa(), 2, /*quantize_q8_0=*/true, /*round_bf16=*/true);
  constexpr int64_t kN = 20;
  constexpr int64_t kM = 70;
  constexpr int64_t kK = 576;
  std::mt19937 rng(11);
  std::vector<float> decoded;
  std::vector<uint8_t> w_bytes =
      EncodeWeights(DType::kBF16, RandomFloats(rng, kM * kK), kM, kK, &decoded);
  std::vector<float> x = RandomFloats(rng, kN * kK);
  std::vector<uint16_t> x16;
  for (float v : x)
    x16.push_back(F32ToBf16(v));
  const Tensor wt = HostTensor(DType::kBF16, {kM, kK}, w_bytes.data());
  std::vector<float> want(kN * kM), got(kN * kM);
  if (!backend->MatMulTakesBf16Activations(DType::kBF16)) {
    EXPECT_EQ(backend
                  ->MatMul(HostTensor(DType::kBF16, {kN, kK}, x16.data()), wt, nullptr,
                           HostTensor(DType::kF32, {kN, kM}, got.data()))
                  .code(),
              absl::StatusCode::kInvalidArgument);
    GTEST_SKIP() << "no AVX512_BF16: BF16 activations are refused";
  }
  EXPECT_FALSE(backend->MatMulTakesBf16Activations(DType::kQ8_0));
  for (const bool pack : {false, true}) {
    Buffer packed;
    if (pack) {
      auto p = backend->PackMatMulWeights(std::span<const Tensor>(&wt, 1));
      ASSERT_TRUE(p.ok()) << p.status();
      packed = *std::move(p);
    }
    for (MatMulPath path : {MatMulPath::kStreaming, MatMulPath::kPanel}) {
      for (const int64_t n : {int64_t{1}, int64_t{4}, kN}) {
        const Tensor xn16 = HostTensor(DType::kBF16, {n, kK}, x16.data());
        const Tensor xn32 = HostTensor(DType::kF32, {n, kK}, x.data());
        const Tensor wn = HostTensor(DType::kF32, {n, kM}, want.data());
        const Tensor gn = HostTensor(DType::kF32, {n, kM}, got.data());
        ASSERT_TRUE(backend->MatMulOnPath(xn32, wt, nullptr, wn, path).ok());
        ASSERT_TRUE(backend->MatMulOnPath(xn16, wt, nullptr, gn, path).ok());
        EXPECT_EQ(std::memcmp(want.data(), got.data(), static_cast<size_t>(n * kM) * 4), 0)
            << "pack " << pack << " n " << n;
      }
    }
  }
  // An odd k cannot be given in bf16.
  std::vector<uint16_t> odd(3 * 5);
  std::vector<uint8_t> w_odd =
      EncodeWeights(DType::kBF16, RandomFloats(rng, 2 * 5), 2, 5, &decoded);
  std::vector<float> out(3 * 2);
  EXPECT_EQ(backend
                ->MatMul(HostTensor(DType::kBF16, {3, 5}, odd.data()),
                         HostTensor(DType::kBF16, {2, 5}, w_odd.data()), nullptr,
                         HostTensor(DType::kF32, {3, 2}, out.data()))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// BF16 and Q8_0 weights packed once (Backend::PackMatMulWeights), as a model's are: every
// row count and path reads the packed panels where the AVX512_BF16 (BF16, k even) or VNNI
// (Q8_0) panel kernels run; elsewhere nothing is packed and MatMul reads the weights as
// they are.
class PackedMatMulTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {};

TEST_P(PackedMatMulTest, MatchesReferenceAtEveryRowCountAndPath) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa, 2, /*quantize_q8_0=*/true, /*round_bf16=*/true);
  const bool q8 = dtype == DType::kQ8_0;
  // Row counts through the streaming limit and past a tile; k past one 512-column (bf16)
  // or 16-block (Q8_0) pass, and odd (bf16: not packed); m not a multiple of 32.
  std::vector<MatMulCase> cases = {
      {1, 64, 33},  {2, 576, 70},   {4, 1024, 64}, {13, 544, 45},
      {16, 96, 70}, {17, 1536, 40}, {32, 96, 65},  {300, 64, 33},
  };
  if (!q8)
    cases.insert(cases.end(), {{1, 2, 1}, {5, 33, 7}});
  uint32_t seed = 400;
  for (MatMulPath path : {MatMulPath::kAuto, MatMulPath::kStreaming, MatMulPath::kPanel}) {
    for (const MatMulCase& c : cases) {
      CheckMatMul(*backend, dtype, c, /*with_bias=*/seed % 2 == 0, seed,
                  q8 ? XRounding::kQ8_0Blocks : XRounding::kBf16, path, /*pack=*/true);
      ++seed;
    }
  }
}

TEST(PackedWeightsTest, PacksEachWeightOnceWhileItsBufferLives) {
  auto backend = MakeBackend(BestCpuIsa(), 2, /*quantize_q8_0=*/false, /*round_bf16=*/true);
  if (!HasBf16Dot(*backend))
    GTEST_SKIP() << "no AVX512_BF16: nothing is packed";
  constexpr int64_t kM = 40;
  constexpr int64_t kK = 64;
  std::mt19937 rng(7);
  std::vector<float> decoded;
  std::vector<uint8_t> w_bytes =
      EncodeWeights(DType::kBF16, RandomFloats(rng, kM * kK), kM, kK, &decoded);
  std::vector<float> x = RandomFloats(rng, 3 * kK);
  const Tensor wt = HostTensor(DType::kBF16, {kM, kK}, w_bytes.data());
  const Tensor xt = HostTensor(DType::kF32, {3, kK}, x.data());
  std::vector<float> unpacked(3 * kM), from_packed(3 * kM), after(3 * kM);
  ASSERT_TRUE(
      backend->MatMul(xt, wt, nullptr, HostTensor(DType::kF32, {3, kM}, unpacked.data())).ok());
  EXPECT_TRUE(backend->MatMulPathsDiffer(wt, 3));

  const std::vector<Tensor> twice = {wt, wt};
  auto first = backend->PackMatMulWeights(twice);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size_bytes(), static_cast<size_t>(64 * kK * 2));  // one copy: 2 panels
  EXPECT_FALSE(backend->MatMulPathsDiffer(wt, 3));
  auto again = backend->PackMatMulWeights(std::span<const Tensor>(&wt, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size_bytes(), 0u);  // already held by `first`
  ASSERT_TRUE(
      backend->MatMul(xt, wt, nullptr, HostTensor(DType::kF32, {3, kM}, from_packed.data())).ok());

  // Released: MatMul reads the weight as it is again, and it can be packed anew.
  *first = Buffer();
  EXPECT_TRUE(backend->MatMulPathsDiffer(wt, 3));
  ASSERT_TRUE(
      backend->MatMul(xt, wt, nullptr, HostTensor(DType::kF32, {3, kM}, after.data())).ok());
  auto anew = backend->PackMatMulWeights(std::span<const Tensor>(&wt, 1));
  ASSERT_TRUE(anew.ok());
  EXPECT_NE(anew->size_bytes(), 0u);
  for (size_t i = 0; i < unpacked.size(); ++i) {
    // Same products, summed in another order.
    EXPECT_NEAR(from_packed[i], unpacked[i], 1e-5f * (1.0f + std::fabs(unpacked[i]))) << i;
    EXPECT_EQ(after[i], unpacked[i]) << i;
  }
}

// Both MatMul shapes where a caller picks one (a compiled step measures both), on row
// counts where both apply, with the activation rounding each dtype's fast path does.
class MatMulPathTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {};

TEST_P(MatMulPathTest, EitherPathMatchesReference) {
  const auto [isa, dtype] = GetParam();
  auto backend = MakeBackend(isa, 2, /*quantize_q8_0=*/true, /*round_bf16=*/true);
  const XRounding rounding = dtype == DType::kQ8_0   ? XRounding::kQ8_0Blocks
                             : dtype == DType::kBF16 ? XRounding::kBf16
                                                     : XRounding::kNone;
  const std::vector<MatMulCase> cases = {{1, 64, 33}, {4, 96, 70}, {15, 64, 40}, {16, 160, 65}};
  uint32_t seed = 300;
  for (MatMulPath path : {MatMulPath::kStreaming, MatMulPath::kPanel, MatMulPath::kAuto}) {
    for (const MatMulCase& c : cases) {
      CheckMatMul(*backend, dtype, c, /*with_bias=*/seed % 2 == 0, seed, rounding, path);
      ++seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, MatMulPathTest,
                         ::testing::Combine(::testing::ValuesIn(testing::SupportedIsas()),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16, DType::kQ8_0)),
                         IsaDTypeName);

INSTANTIATE_TEST_SUITE_P(AllIsas, PackedMatMulTest,
                         ::testing::Combine(::testing::ValuesIn(testing::SupportedIsas()),
                                            ::testing::Values(DType::kBF16, DType::kQ8_0)),
                         IsaDTypeName);

INSTANTIATE_TEST_SUITE_P(AllIsas, Bf16DotMatMulTest, ::testing::ValuesIn(testing::SupportedIsas()),
                         testing::IsaParamName);

INSTANTIATE_TEST_SUITE_P(AllIsas, QuantizedMatMulTest,
                         ::testing::ValuesIn(testing::SupportedIsas()), testing::IsaParamName);

INSTANTIATE_TEST_SUITE_P(AllIsas, MatMulTest,
                         ::testing::Combine(::testing::ValuesIn(testing::SupportedIsas()),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16, DType::kQ8_0)),
                         IsaDTypeName);

// MatMuls: several weights against one x (a layer's q, k, v) give, term by term, what MatMul
// gives for each, bit for bit: where every term streams GGML-quant rows (decode) or reads
// Q8_0 panels packed at load, the terms' rows are split over the threads together, and a
// row's result must not depend on which thread or chunk takes it; elsewhere (more rows, or
// an F32 or unpacked Q8_0 term) each term is a MatMul. Weight dtypes mixed as in a Q4_K_M
// file, a bias on one term, odd row counts.
class MatMulsTest : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(MatMulsTest, EveryTermGivesWhatMatMulGives) {
  std::mt19937 rng(77);
  constexpr int64_t kK = 768;
  constexpr int64_t kMaxRows = 40;
  const std::vector<float> x = RandomFloats(rng, kMaxRows * kK);
  std::vector<float> bias = RandomFloats(rng, 67);
  struct Weight {
    DType dtype;
    int64_t m;
    std::vector<uint8_t> bytes;
  };
  std::vector<Weight> weights;
  for (const auto& [dtype, m] : {std::pair{DType::kQ4_1, 67}, std::pair{DType::kQ6_K, 33},
                                 std::pair{DType::kQ4_K, 70}, std::pair{DType::kQ4_0, 1}}) {
    weights.push_back({dtype, m, RandomGgmlRows(dtype, m, kK, rng)});
  }
  std::vector<float> decoded;
  for (const auto& [dtype, m] : {std::pair{DType::kQ8_0, 45}, std::pair{DType::kF32, 20}}) {
    weights.push_back(
        {dtype, m, testing::EncodeWeights(dtype, RandomFloats(rng, m * kK), m, kK, &decoded)});
  }
  // Which weights, and whether the Q8_0 one (index 4) is packed first as a model's are.
  const std::vector<std::pair<std::vector<size_t>, bool>> sets = {
      {{0, 1, 2, 3}, false}, {{4, 0, 1}, true}, {{0, 4, 5}, false}, {{4, 2, 5, 3}, true}};
  for (const auto& [set, pack] : sets) {
    for (const size_t threads : {size_t{2}, size_t{3}}) {
      auto backend = MakeBackend(GetParam(), threads, /*quantize_q8_0=*/true);
      std::vector<Tensor> wts;
      for (const size_t i : set)
        wts.push_back(HostTensor(weights[i].dtype, {weights[i].m, kK}, weights[i].bytes.data()));
      Buffer packed;
      if (pack) {
        absl::StatusOr<Buffer> made = backend->PackMatMulWeights(wts);
        ASSERT_TRUE(made.ok()) << made.status();
        packed = std::move(made).value();
      }
      for (const int64_t n : {int64_t{1}, int64_t{3}, kMaxRows}) {
        const Tensor xt = HostTensor(DType::kF32, {n, kK}, const_cast<float*>(x.data()));
        const Tensor bt = HostTensor(DType::kF32, {67}, bias.data());
        std::vector<std::vector<float>> outs, wants;
        std::vector<Tensor> out_ts;
        for (const size_t i : set) {
          outs.emplace_back(static_cast<size_t>(n * weights[i].m), -7.0f);
          wants.emplace_back(static_cast<size_t>(n * weights[i].m), -9.0f);
          out_ts.push_back(HostTensor(DType::kF32, {n, weights[i].m}, outs.back().data()));
        }
        std::vector<Backend::MatMulTerm> terms;
        for (size_t t = 0; t < set.size(); ++t)
          terms.push_back({&wts[t], set[t] == 0 ? &bt : nullptr, &out_ts[t]});
        ASSERT_TRUE(backend->MatMuls(xt, terms).ok());
        for (size_t t = 0; t < set.size(); ++t) {
          const Weight& w = weights[set[t]];
          ASSERT_TRUE(backend
                          ->MatMul(xt, wts[t], set[t] == 0 ? &bt : nullptr,
                                   HostTensor(DType::kF32, {n, w.m}, wants[t].data()))
                          .ok());
          for (size_t e = 0; e < wants[t].size(); ++e) {
            ASSERT_EQ(outs[t][e], wants[t][e])
                << DTypeName(w.dtype) << " n=" << n << " threads=" << threads << " term " << t
                << " packed=" << pack << " at " << e;
          }
        }
      }
    }
  }
}

TEST_P(MatMulsTest, ABadTermIsMatMulsError) {
  auto backend = MakeBackend(GetParam(), 2, /*quantize_q8_0=*/true);
  std::mt19937 rng(5);
  std::vector<uint8_t> w = RandomGgmlRows(DType::kQ4_1, 8, 64, rng);
  std::vector<float> x = RandomFloats(rng, 64), out(8), wrong(7);
  const Tensor xt = HostTensor(DType::kF32, {1, 64}, x.data());
  const Tensor wt = HostTensor(DType::kQ4_1, {8, 64}, w.data());
  const Tensor ot = HostTensor(DType::kF32, {1, 8}, out.data());
  const Tensor bad = HostTensor(DType::kF32, {1, 7}, wrong.data());
  const Backend::MatMulTerm terms[] = {{&wt, nullptr, &ot}, {&wt, nullptr, &bad}};
  const absl::Status status = backend->MatMuls(xt, terms);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("out"), std::string_view::npos) << status;
}

INSTANTIATE_TEST_SUITE_P(AllIsas, MatMulsTest, ::testing::ValuesIn(testing::SupportedIsas()),
                         testing::IsaParamName);

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
