// Generated row kernels, built by the host compiler and loaded, against the CPU backend's
// own Add, RmsNorm and SwiGlu (and its bf16 rounding) on the same rows: the same bits, for
// widths with and without a tail of the eight-lane loop, with outputs aliasing inputs as
// the fusion pass allows, built for the portable and the best ISA level.
#include "compile/row_kernels.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "compile/kernel_library.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/float16.h"

namespace switchyard::compile {
namespace {

using runtime::DType;
using runtime::Tensor;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(rng);
  return v;
}

struct Fixture {
  std::unique_ptr<runtime::Backend> backend;
  std::shared_ptr<const KernelLibrary> library;
};

Fixture Build(const std::vector<RowKernelSpec>& specs, std::string_view isa) {
  Fixture f;
  auto backend = runtime::CreateCpuBackend({.num_threads = 2});
  EXPECT_TRUE(backend.ok()) << backend.status();
  f.backend = std::move(*backend);
  CacheLevel level = CacheLevel::kMemory;
  auto library = KernelLibrary::Build(specs, isa, nullptr, &level);
  EXPECT_TRUE(library.ok()) << library.status();
  if (library.ok())
    f.library = *std::move(library);
  EXPECT_EQ(level, CacheLevel::kCompiled);
  return f;
}

std::vector<std::string> IsaLevels() {
  std::vector<std::string> levels = {"portable"};
  const std::string best(runtime::CpuIsaName(runtime::BestCpuIsa()));
  if (best != "portable")
    levels.push_back(best);
  return levels;
}

// The backend's ops on copies: s = a + b, h = RmsNorm(s) (or of a alone), h rounded to bf16
// where asked.
struct Reference {
  std::vector<float> s, h;
  std::vector<uint16_t> h_bf16;
};

Reference Expected(runtime::Backend& backend, const RowKernelSpec& spec, int64_t rows,
                   std::vector<float> a, std::vector<float> b, std::vector<float> w) {
  const int64_t cols = spec.cols;
  Reference r;
  r.s = std::move(a);
  if (spec.residual) {
    EXPECT_TRUE(backend
                    .Add(Tensor(DType::kF32, {rows, cols}, r.s.data()),
                         Tensor(DType::kF32, {rows, cols}, b.data()),
                         Tensor(DType::kF32, {rows, cols}, r.s.data()))
                    .ok());
  }
  r.h.resize(r.s.size());
  EXPECT_TRUE(backend
                  .RmsNorm(Tensor(DType::kF32, {rows, cols}, r.s.data()),
                           Tensor(DType::kF32, {cols}, w.data()), spec.eps,
                           Tensor(DType::kF32, {rows, cols}, r.h.data()))
                  .ok());
  for (float v : r.h)
    r.h_bf16.push_back(runtime::F32ToBf16(v));
  return r;
}

class RowKernelsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RowKernelsTest, ComputeWhatTheBackendsOpsCompute) {
  std::vector<RowKernelSpec> specs;
  for (const int64_t cols : {576, 64, 13, 8, 1}) {
    for (const bool residual : {false, true}) {
      specs.push_back({RowKernelKind::kRmsNorm, residual, cols, 1e-5f, DType::kF32});
      if (cols % 2 == 0)
        specs.push_back({RowKernelKind::kRmsNorm, residual, cols, 1e-6f, DType::kBF16});
    }
  }
  Fixture f = Build(specs, GetParam());
  ASSERT_NE(f.library, nullptr);
  ASSERT_EQ(f.library->size(), specs.size());
  constexpr int64_t kRows = 7;
  for (size_t k = 0; k < specs.size(); ++k) {
    const RowKernelSpec& spec = specs[k];
    SCOPED_TRACE(RowKernelCanonical(spec));
    const auto n = static_cast<size_t>(kRows * spec.cols);
    const std::vector<float> a = Random(n, 1), b = Random(n, 2),
                             w = Random(static_cast<size_t>(spec.cols), 3);
    const Reference want = Expected(*f.backend, spec, kRows, a, b, w);
    const bool bf16 = spec.out_dtype == DType::kBF16;
    // Separate outputs, then (F32) the sum over a and the norm over it, as a layer's
    // residual stream is updated in place.
    for (const bool in_place : {false, true}) {
      if (in_place && bf16)
        continue;  // the fusion pass keeps rounded rows apart from what they are read from
      std::vector<float> a_run = a, s(n), h(n);
      std::vector<uint16_t> h16(n);
      float* s_at = in_place ? a_run.data() : s.data();
      void* h_at = bf16 ? static_cast<void*>(h16.data()) : (in_place ? s_at : h.data());
      std::vector<void*> ops;
      if (spec.residual) {
        ops = {a_run.data(), const_cast<float*>(b.data()), const_cast<float*>(w.data()), s_at,
               h_at};
      } else {
        ops = {a_run.data(), const_cast<float*>(w.data()), h_at};
      }
      ASSERT_TRUE(
          f.backend->RunRowKernel(f.library->kernel(k), ops, kRows, RowKernelWork(spec)).ok());
      if (bf16) {
        EXPECT_EQ(std::memcmp(h16.data(), want.h_bf16.data(), n * 2), 0);
      } else {
        EXPECT_EQ(std::memcmp(h_at, want.h.data(), n * 4), 0);
      }
      if (spec.residual && !(in_place && !bf16))
        EXPECT_EQ(std::memcmp(s_at, want.s.data(), n * 4), 0);
    }
  }
}

// SwiGLU, whose exp is the vector one of the AVX2 and AVX-512 backends (the ones with bf16
// MatMuls; the portable backend calls std::exp), over gate values from far negative to far
// positive (the clamped ends of exp included).
TEST_P(RowKernelsTest, SwiGluComputesWhatTheVectorBackendsCompute) {
  auto backend = runtime::CreateCpuBackend({.num_threads = 2});
  ASSERT_TRUE(backend.ok());
  if (runtime::BestCpuIsa() == runtime::CpuIsa::kPortable)
    GTEST_SKIP() << "the portable backend's exp is std::exp";
  std::vector<RowKernelSpec> specs;
  for (const int64_t cols : {1536, 18, 2})
    specs.push_back({RowKernelKind::kSwiGlu, false, cols, 0.0f, DType::kBF16});
  specs.push_back({RowKernelKind::kSwiGlu, false, 40, 0.0f, DType::kF32});
  Fixture f = Build(specs, GetParam());
  ASSERT_NE(f.library, nullptr);
  constexpr int64_t kRows = 5;
  for (size_t k = 0; k < specs.size(); ++k) {
    const RowKernelSpec& spec = specs[k];
    SCOPED_TRACE(RowKernelCanonical(spec));
    const auto n = static_cast<size_t>(kRows * spec.cols);
    std::vector<float> gate = Random(n, 4), up = Random(n, 5), want(n);
    for (size_t t = 0; t < n; t += 7)
      gate[t] *= 60.0f;  // past exp's clamps at -87 and 88 now and then
    gate[1] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE((*backend)
                    ->SwiGlu(Tensor(DType::kF32, {kRows, spec.cols}, gate.data()),
                             Tensor(DType::kF32, {kRows, spec.cols}, up.data()),
                             Tensor(DType::kF32, {kRows, spec.cols}, want.data()))
                    .ok());
    std::vector<float> got32(n);
    std::vector<uint16_t> got16(n);
    const bool bf16 = spec.out_dtype == DType::kBF16;
    std::vector<void*> ops = {gate.data(), up.data(),
                              bf16 ? static_cast<void*>(got16.data()) : got32.data()};
    ASSERT_TRUE(
        f.backend->RunRowKernel(f.library->kernel(k), ops, kRows, RowKernelWork(spec)).ok());
    for (size_t t = 0; t < n; ++t) {
      if (bf16) {
        ASSERT_EQ(got16[t], runtime::F32ToBf16(want[t])) << t << " gate " << gate[t];
      } else {
        ASSERT_EQ(std::memcmp(&got32[t], &want[t], 4), 0) << t << " gate " << gate[t];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsaLevels, RowKernelsTest, ::testing::ValuesIn(IsaLevels()));

TEST(RowKernelSourceTest, NamesEveryKernelAndItsSpec) {
  const std::vector<RowKernelSpec> specs = {
      {RowKernelKind::kRmsNorm, true, 576, 1e-5f, DType::kBF16},
      {RowKernelKind::kSwiGlu, false, 64, 0.0f, DType::kF32}};
  const std::string source = GenerateRowKernelSource(specs);
  EXPECT_NE(source.find("extern \"C\" void sy_row_kernel_0("), std::string::npos);
  EXPECT_NE(source.find("extern \"C\" void sy_row_kernel_1("), std::string::npos);
  EXPECT_NE(source.find("// " + RowKernelCanonical(specs[0])), std::string::npos);
  EXPECT_EQ(RowKernelCanonical(specs[0]),
            "rms_norm residual=1 cols=576 eps=0x1.4f8b58p-17 out=BF16");
  // The same specs give the same text: the cache key hashes it.
  EXPECT_EQ(source, GenerateRowKernelSource(specs));
}

TEST(KernelLibraryTest, ACompilerThatFailsIsAnErrorWithItsWords) {
  ASSERT_EQ(::setenv("SWITCHYARD_CXX", "false", 1), 0);
  CacheLevel level = CacheLevel::kMemory;
  const RowKernelSpec spec{RowKernelKind::kRmsNorm, false, 8, 1e-5f, DType::kF32};
  auto library = KernelLibrary::Build({&spec, 1}, "portable", nullptr, &level);
  ::unsetenv("SWITCHYARD_CXX");
  ASSERT_FALSE(library.ok());
  EXPECT_NE(library.status().message().find("SWITCHYARD_CXX"), std::string::npos);
}

}  // namespace
}  // namespace switchyard::compile
