// AVX-512 (F/BW/VL + FMA + F16C) inner loops. Everything here is compiled for that target
// by the pragma below and reached only through Avx512Kernels(), which callers use only
// after CpuSupportsIsa(kAvx512) said yes; the rest of the build stays portable.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/avx512_loaders.h"
#include "runtime/cpu/internal/avx512_transpose.h"
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

// Loaders: 16 weights of a row starting at element t, as f32 (see avx512_loaders.h for
// F32, BF16 and F16). t % 16 == 0 for Q8_0.
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
    // Unrolled so that the accumulators stay in registers (see isa_avx2.cc).
    __m512 acc0[N];
    __m512 acc1[N];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i)
      acc0[i] = acc1[i] = _mm512_setzero_ps();
    int64_t t = 0;
    for (; t + 2 * kWidth <= k_vec; t += 2 * kWidth) {
      const __m512 w0 = Loader::Load(row, t);
      const __m512 w1 = Loader::Load(row, t + kWidth);
#pragma GCC unroll 8
      for (int i = 0; i < N; ++i) {
        acc0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + t), w0, acc0[i]);
        acc1[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + t + kWidth), w1, acc1[i]);
      }
    }
    for (; t < k_vec; t += kWidth) {
      const __m512 w0 = Loader::Load(row, t);
#pragma GCC unroll 8
      for (int i = 0; i < N; ++i) {
        acc0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + t), w0, acc0[i]);
      }
    }
#pragma GCC unroll 8
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
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
      // Exact path (activations kept in f32): dequantized in chunks.
      return PortableKernels().dot_rows(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
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
  // Every loop over MR unrolled, so that the accumulators live only in registers (a rolled
  // one made GCC zero a stack copy of them with rep stos on every call).
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
    acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t t = 0; t < kc; ++t) {
    const __m512 b0 = _mm512_load_ps(panel + t * kPanelRows);
    const __m512 b1 = _mm512_load_ps(panel + t * kPanelRows + kWidth);
#pragma GCC unroll 16
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
#pragma GCC unroll 16
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

// Remainder rows: one tile of exactly `rows` (< MR) rows.
template <int MR>
void GemmRest(int64_t rows, const float* a, int64_t lda, const float* panel, int64_t kc, float* out,
              int64_t ldo, int64_t cols, bool accumulate) {
  if constexpr (MR > 0) {
    if (rows == MR)
      return GemmTile<MR>(a, lda, panel, kc, out, ldo, cols, accumulate);
    GemmRest<MR - 1>(rows, a, lda, panel, kc, out, ldo, cols, accumulate);
  }
}

void GemmPanel(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc, float* out,
               int64_t ldo, int64_t cols, bool accumulate) {
  // 2 * kMr accumulators + 2 panel vectors + 1 broadcast fit the 32 zmm registers.
  constexpr int kMr = 12;
  int64_t i = 0;
  for (; i + kMr <= n; i += kMr) {
    GemmTile<kMr>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
  }
  GemmRest<kMr - 1>(n - i, a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
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

// f32 -> bf16 bits in the low 16 bits of each lane, rounded like F32ToBf16.
__m512i RoundToBf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), quiet);
}

void ToF32(DType dtype, const void* src, int64_t n, float* out) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  int64_t t = 0;
  switch (dtype) {
    case DType::kBF16:
      for (; t + kWidth <= n; t += kWidth)
        _mm512_storeu_ps(out + t, LoadBf16::Load(bytes, t));
      break;
    case DType::kF16:
      for (; t + kWidth <= n; t += kWidth)
        _mm512_storeu_ps(out + t, LoadF16::Load(bytes, t));
      break;
    case DType::kQ8_0:
      for (; t + kWidth <= n; t += kWidth)
        _mm512_storeu_ps(out + t, LoadQ8_0::Load(bytes, t));
      break;
    case DType::kF32:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kI32:
      break;
  }
  DequantizeRow(dtype, bytes + RowBytes(dtype, t), n - t, out + t);
}

void FromF32(DType dtype, const float* src, int64_t n, void* dst) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t t = 0;
  if (dtype == DType::kBF16) {
    for (; t + kWidth <= n; t += kWidth) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + t),
                          _mm512_cvtepi32_epi16(RoundToBf16(_mm512_loadu_ps(src + t))));
    }
  } else if (dtype == DType::kF16) {
    for (; t + kWidth <= n; t += kWidth) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + t),
                          _mm512_cvtps_ph(_mm512_loadu_ps(src + t), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  PortableKernels().from_f32(dtype, src + t, n - t,
                             static_cast<uint8_t*>(dst) + RowBytes(dtype, t));
}

// 16 x 16 tiles: rows converted with the dtype's loader, transposed in registers.
template <typename Loader>
void PackPanelLoader(DType dtype, const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0,
                     int64_t kc, float* panel) {
  const int64_t kc_vec = kc / kWidth * kWidth;
  const size_t col_offset = RowBytes(dtype, t0);
  for (int64_t g = 0; g < kPanelRows; g += kWidth) {
    for (int64_t t = 0; t < kc_vec; t += kWidth) {
      __m512 r[16];
      for (int64_t i = 0; i < kWidth; ++i) {
        r[i] = g + i < rows
                   ? Loader::Load(w + static_cast<size_t>(g + i) * w_row_bytes + col_offset, t)
                   : _mm512_setzero_ps();
      }
      Transpose16x16(r);
      for (int64_t c = 0; c < kWidth; ++c)
        _mm512_store_ps(panel + (t + c) * kPanelRows + g, r[c]);
    }
  }
  for (int64_t t = kc_vec; t < kc; ++t) {
    for (int64_t r = 0; r < kPanelRows; ++r) {
      panel[t * kPanelRows + r] =
          r < rows ? ScalarWeight(dtype, w + static_cast<size_t>(r) * w_row_bytes, t0 + t) : 0.0f;
    }
  }
}

void PackPanel(DType w_dtype, const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0,
               int64_t kc, float* panel) {
  switch (w_dtype) {
    case DType::kF32:
      return PackPanelLoader<LoadF32>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kBF16:
      return PackPanelLoader<LoadBf16>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kF16:
      return PackPanelLoader<LoadF16>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kQ8_0:
      return PackPanelLoader<LoadQ8_0>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
      return PortableKernels().pack_panel(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kI32:
      return;
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
  static const IsaKernels kKernels = [] {
    IsaKernels k{};
    k.dot_rows = &DotRows;
    k.gemm_panel = &GemmPanel;
    k.pack_panel = &PackPanel;
    k.to_f32 = &ToF32;
    k.from_f32 = &FromF32;
    k.dot = &Dot;
    k.max_streaming_rows = kAvx512StreamingRows;
    SetAvx512AttentionKernels(&k);
    return k;
  }();
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
