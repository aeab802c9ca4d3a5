// Helpers shared by the runtime kernel tests: a backend per ISA, seeded random data, host
// tensors, and weight encoding with the exact values the kernels will see.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "runtime/backend.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/float16.h"

namespace switchyard::runtime::testing {

inline std::vector<CpuIsa> SupportedIsas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (CpuSupportsIsa(isa))
      isas.push_back(isa);
  }
  return isas;
}

inline std::string IsaParamName(const ::testing::TestParamInfo<CpuIsa>& info) {
  return std::string(CpuIsaName(info.param));
}

// Exact kernels (f32 activations for Q8_0 and BF16 weights) unless quantize_q8_0 or
// round_bf16 says otherwise.
inline std::unique_ptr<Backend> MakeBackend(CpuIsa isa, size_t threads = 2,
                                            bool quantize_q8_0 = false, bool round_bf16 = false) {
  auto backend = CreateCpuBackend({.num_threads = threads,
                                   .isa = isa,
                                   .quantize_q8_0_activations = quantize_q8_0,
                                   .round_bf16_activations = round_bf16});
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

inline std::vector<float> RandomFloats(std::mt19937& rng, int64_t n, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v)
    f = dist(rng);
  return v;
}

// Weight bytes in `dtype` for the f32 values `w` ([rows, cols]), and (through `decoded`)
// the f32 values those bytes represent, which a reference must use.
inline std::vector<uint8_t> EncodeWeights(DType dtype, const std::vector<float>& w, int64_t rows,
                                          int64_t cols, std::vector<float>* decoded) {
  const size_t row_bytes = RowBytes(dtype, cols);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = w.data() + r * cols;
    uint8_t* dst = bytes.data() + static_cast<size_t>(r) * row_bytes;
    switch (dtype) {
      case DType::kF32:
        std::memcpy(dst, src, row_bytes);
        break;
      case DType::kF16:
        for (int64_t c = 0; c < cols; ++c) {
          const uint16_t h = F32ToF16(src[c]);
          std::memcpy(dst + 2 * c, &h, 2);
        }
        break;
      case DType::kBF16:
        for (int64_t c = 0; c < cols; ++c) {
          const uint16_t h = F32ToBf16(src[c]);
          std::memcpy(dst + 2 * c, &h, 2);
        }
        break;
      case DType::kQ8_0:
        QuantizeRowQ8_0(src, cols, dst);
        break;
      case DType::kI32:
      default:  // GGML's Q4/Q5/K types: ggml_reference.h makes their rows.
        break;
    }
  }
  decoded->resize(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(dtype, bytes.data() + static_cast<size_t>(r) * row_bytes, cols,
                  decoded->data() + r * cols);
  }
  return bytes;
}

inline Tensor HostTensor(DType dtype, std::initializer_list<int64_t> shape, void* data) {
  return Tensor(dtype, shape, data, MemorySpace::kHost);
}

}  // namespace switchyard::runtime::testing
