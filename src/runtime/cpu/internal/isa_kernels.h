// Per-instruction-set inner loops of the CPU backend. Each table is stateless and
// callable from any thread; the drivers in runtime/cpu/*.cc split work across the pool
// and call these on disjoint outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/cpu/cpu_backend.h"
#include "runtime/dtype.h"

namespace switchyard::runtime::cpu {

// Width of a packed weight panel: GEMM packs 32 weight rows, k-major, as f32.
inline constexpr int64_t kPanelRows = 32;

struct IsaKernels {
  // For weight rows j in [m_begin, m_end) and activation rows i in [0, n):
  //   out[i * ldo + j] = sum_t x[i * k + t] * w_j[t],  w_j at w + j * w_row_bytes.
  // REQUIRES: w_dtype is a weight dtype; k % 32 == 0 for Q8_0.
  void (*dot_rows)(DType w_dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
  // For rows i in [0, n) and panel columns c in [0, cols):
  //   out[i * ldo + c] (+)= sum_t a[i * lda + t] * panel[t * kPanelRows + c], t < kc.
  // Adds to out when accumulate, else overwrites. REQUIRES: cols <= kPanelRows.
  void (*gemm_panel)(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc,
                     float* out, int64_t ldo, int64_t cols, bool accumulate);
  // sum_t a[t] * b[t].
  float (*dot)(const float* a, const float* b, int64_t len);
  // y = y * beta + alpha * x.
  void (*scale_add)(float beta, float* y, float alpha, const float* x, int64_t len);
};

const IsaKernels& PortableKernels();
const IsaKernels& Avx2Kernels();
const IsaKernels& Avx512Kernels();
const IsaKernels& KernelsFor(CpuIsa isa);

}  // namespace switchyard::runtime::cpu
