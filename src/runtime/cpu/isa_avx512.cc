// AVX-512 (F/BW/VL + FMA + F16C) inner loops. Everything here is compiled for that target
// by the pragma below and reached only through Avx512Kernels(), which callers use only
// after CpuSupportsIsa(kAvx512) said yes; the rest of the build stays portable.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/float16.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")
// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment, which its own
// -Wuninitialized flags once inlined here at -O2.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace switchyard::runtime::cpu {
namespace {

constexpr int64_t kWidth = 16;

// Loaders: 16 weights of a row starting at element t, as f32. t % 16 == 0 for Q8_0.
struct LoadF32 {
  static __m512 Load(const uint8_t* row, int64_t t) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + t);
  }
};
struct LoadBf16 {
  static __m512 Load(const uint8_t* row, int64_t t) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * t));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};
struct LoadF16 {
  static __m512 Load(const uint8_t* row, int64_t t) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * t)));
  }
};
struct LoadQ8_0 {
  static __m512 Load(const uint8_t* row, int64_t t) {
    const uint8_t* block = row + (t / kQ8_0BlockElems) * kQ8_0BlockBytes;
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, sizeof(scale_bits));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + t % 32));
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(scale_bits));
    return _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  }
};

float ScalarWeight(DType dtype, const uint8_t* row, int64_t t) {
  float f;
  DequantizeRow(dtype, row + RowBytes(dtype, t), 1, &f);
  return f;
}

// N activation rows against weight rows [m_begin, m_end): each weight vector is loaded and
// converted once and used for all N rows.
template <int N, typename Loader>
void DotRowsN(DType dtype, const float* x, int64_t k, const uint8_t* w, size_t w_row_bytes,
              int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  const int64_t k_vec = k / kWidth * kWidth;
  for (int64_t j = m_begin; j < m_end; ++j) {
    const uint8_t* row = w + static_cast<size_t>(j) * w_row_bytes;
    __m512 acc0[N];
    __m512 acc1[N];
    for (int i = 0; i < N; ++i)
      acc0[i] = acc1[i] = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 2 * kWidth <= k_vec; t += 2 * kWidth) {
      const __m512 w0 = Loader::Load(row, t);
      const __m512 w1 = Loader::Load(row, t + kWidth);
      for (int i = 0; i < N; ++i) {
        acc0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + t), w0, acc0[i]);
        acc1[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + t + kWidth), w1, acc1[i]);
      }
    }
    for (; t < k_vec; t += kWidth) {
      const __m512 w0 = Loader::Load(row, t);
      for (int i = 0; i < N; ++i) {
        acc0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + t), w0, acc0[i]);
      }
    }
    for (int i = 0; i < N; ++i) {
      float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i]));
      for (int64_t tt = k_vec; tt < k; ++tt)
        sum += x[i * k + tt] * ScalarWeight(dtype, row, tt);
      out[i * ldo + j] = sum;
    }
  }
}

// Weight rows go in blocks small enough to stay in L1/L2 while every group of activation
// rows passes over them, so the weights stream from memory once whatever n is.
template <typename Loader>
void DotRowsLoader(DType dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  constexpr int64_t kRowBlock = 8;
  for (int64_t j0 = m_begin; j0 < m_end; j0 += kRowBlock) {
    const int64_t j1 = std::min(m_end, j0 + kRowBlock);
    int64_t i = 0;
    for (; i + 3 <= n; i += 3) {
      DotRowsN<3, Loader>(dtype, x + i * k, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    }
    if (n - i == 2) {
      DotRowsN<2, Loader>(dtype, x + i * k, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    } else if (n - i == 1) {
      DotRowsN<1, Loader>(dtype, x + i * k, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    }
  }
}

void DotRows(DType w_dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  switch (w_dtype) {
    case DType::kF32:
      return DotRowsLoader<LoadF32>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kBF16:
      return DotRowsLoader<LoadBf16>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kF16:
      return DotRowsLoader<LoadF16>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kQ8_0:
      return DotRowsLoader<LoadQ8_0>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kI32:
      return;
  }
}

// MR rows x 32 panel columns, accumulators in 2*MR registers.
template <int MR>
void GemmTile(const float* a, int64_t lda, const float* panel, int64_t kc, float* out, int64_t ldo,
              int64_t cols, bool accumulate) {
  __m512 acc0[MR];
  __m512 acc1[MR];
  for (int r = 0; r < MR; ++r)
    acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t t = 0; t < kc; ++t) {
    const __m512 b0 = _mm512_load_ps(panel + t * kPanelRows);
    const __m512 b1 = _mm512_load_ps(panel + t * kPanelRows + kWidth);
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + t]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
  }
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32   ? 0xffff
                                              : cols <= 16 ? 0
                                                           : (1u << (cols - 16)) - 1);
  for (int r = 0; r < MR; ++r) {
    float* o = out + r * ldo;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(acc0[r], _mm512_maskz_loadu_ps(m0, o));
      acc1[r] = _mm512_add_ps(acc1[r], _mm512_maskz_loadu_ps(m1, o + kWidth));
    }
    _mm512_mask_storeu_ps(o, m0, acc0[r]);
    _mm512_mask_storeu_ps(o + kWidth, m1, acc1[r]);
  }
}

void GemmPanel(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc, float* out,
               int64_t ldo, int64_t cols, bool accumulate) {
  constexpr int kMr = 6;
  int64_t i = 0;
  for (; i + kMr <= n; i += kMr) {
    GemmTile<kMr>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
  }
  switch (n - i) {
    case 5:
      return GemmTile<5>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
    case 4:
      return GemmTile<4>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
    case 3:
      return GemmTile<3>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
    case 2:
      return GemmTile<2>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
    case 1:
      return GemmTile<1>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
    default:
      return;
  }
}

float Dot(const float* a, const float* b, int64_t len) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 2 * kWidth <= len; t += 2 * kWidth) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t), _mm512_loadu_ps(b + t), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t + kWidth), _mm512_loadu_ps(b + t + kWidth), acc1);
  }
  for (; t < len; t += kWidth) {
    const __mmask16 mask =
        static_cast<__mmask16>(len - t >= kWidth ? 0xffff : (1u << (len - t)) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + t), _mm512_maskz_loadu_ps(mask, b + t),
                           acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

void ScaleAdd(float beta, float* y, float alpha, const float* x, int64_t len) {
  const __m512 vb = _mm512_set1_ps(beta);
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t t = 0; t < len; t += kWidth) {
    const __mmask16 mask =
        static_cast<__mmask16>(len - t >= kWidth ? 0xffff : (1u << (len - t)) - 1);
    const __m512 yv = _mm512_maskz_loadu_ps(mask, y + t);
    const __m512 r = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(mask, x + t), _mm512_mul_ps(yv, vb));
    _mm512_mask_storeu_ps(y + t, mask, r);
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

const IsaKernels& Avx512Kernels() {
  static constexpr IsaKernels kKernels = {&DotRows, &GemmPanel, &Dot, &ScaleAdd};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
