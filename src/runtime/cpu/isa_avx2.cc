// AVX2 + FMA + F16C inner loops, for x86 CPUs without AVX-512. Compiled for that target by
// the pragma below and reached only through Avx2Kernels(), which callers use only after
// CpuSupportsIsa(kAvx2) said yes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/float16.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace switchyard::runtime::cpu {
namespace {

constexpr int64_t kWidth = 8;

// Loaders: 8 weights of a row starting at element t, as f32. t % 8 == 0 for Q8_0.
struct LoadF32 {
  static __m256 Load(const uint8_t* row, int64_t t) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + t);
  }
};
struct LoadBf16 {
  static __m256 Load(const uint8_t* row, int64_t t) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * t));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};
struct LoadF16 {
  static __m256 Load(const uint8_t* row, int64_t t) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * t)));
  }
};
struct LoadQ8_0 {
  static __m256 Load(const uint8_t* row, int64_t t) {
    const uint8_t* block = row + (t / kQ8_0BlockElems) * kQ8_0BlockBytes;
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, sizeof(scale_bits));
    int64_t q8;
    std::memcpy(&q8, block + 2 + t % 32, sizeof(q8));
    const __m256i q = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(q8));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(scale_bits)), _mm256_cvtepi32_ps(q));
  }
};

float ReduceAdd(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

float ScalarWeight(DType dtype, const uint8_t* row, int64_t t) {
  float f;
  DequantizeRow(dtype, row + RowBytes(dtype, t), 1, &f);
  return f;
}

template <int N, typename Loader>
void DotRowsN(DType dtype, const float* x, int64_t k, const uint8_t* w, size_t w_row_bytes,
              int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  const int64_t k_vec = k / kWidth * kWidth;
  for (int64_t j = m_begin; j < m_end; ++j) {
    const uint8_t* row = w + static_cast<size_t>(j) * w_row_bytes;
    __m256 acc0[N];
    __m256 acc1[N];
    for (int i = 0; i < N; ++i)
      acc0[i] = acc1[i] = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 2 * kWidth <= k_vec; t += 2 * kWidth) {
      const __m256 w0 = Loader::Load(row, t);
      const __m256 w1 = Loader::Load(row, t + kWidth);
      for (int i = 0; i < N; ++i) {
        acc0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * k + t), w0, acc0[i]);
        acc1[i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * k + t + kWidth), w1, acc1[i]);
      }
    }
    for (; t < k_vec; t += kWidth) {
      const __m256 w0 = Loader::Load(row, t);
      for (int i = 0; i < N; ++i) {
        acc0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * k + t), w0, acc0[i]);
      }
    }
    for (int i = 0; i < N; ++i) {
      float sum = ReduceAdd(_mm256_add_ps(acc0[i], acc1[i]));
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
    for (; i + 2 <= n; i += 2) {
      DotRowsN<2, Loader>(dtype, x + i * k, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    }
    if (i < n) {
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

// MR rows x 32 panel columns: 4*MR accumulators.
template <int MR>
void GemmTile(const float* a, int64_t lda, const float* panel, int64_t kc, float* out, int64_t ldo,
              int64_t cols, bool accumulate) {
  __m256 acc[MR][4];
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < 4; ++c)
      acc[r][c] = _mm256_setzero_ps();
  }
  for (int64_t t = 0; t < kc; ++t) {
    const float* p = panel + t * kPanelRows;
    for (int c = 0; c < 4; ++c) {
      const __m256 b = _mm256_load_ps(p + c * kWidth);
      for (int r = 0; r < MR; ++r) {
        acc[r][c] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * lda + t), b, acc[r][c]);
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    float tile[kPanelRows];
    for (int c = 0; c < 4; ++c)
      _mm256_storeu_ps(tile + c * kWidth, acc[r][c]);
    float* o = out + r * ldo;
    for (int64_t c = 0; c < cols; ++c)
      o[c] = accumulate ? o[c] + tile[c] : tile[c];
  }
}

void GemmPanel(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc, float* out,
               int64_t ldo, int64_t cols, bool accumulate) {
  int64_t i = 0;
  for (; i + 3 <= n; i += 3) {
    GemmTile<3>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
  }
  if (n - i == 2) {
    GemmTile<2>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
  } else if (n - i == 1) {
    GemmTile<1>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
  }
}

float Dot(const float* a, const float* b, int64_t len) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 2 * kWidth <= len; t += 2 * kWidth) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + t), _mm256_loadu_ps(b + t), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + t + kWidth), _mm256_loadu_ps(b + t + kWidth), acc1);
  }
  for (; t + kWidth <= len; t += kWidth) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + t), _mm256_loadu_ps(b + t), acc0);
  }
  float sum = ReduceAdd(_mm256_add_ps(acc0, acc1));
  for (; t < len; ++t)
    sum += a[t] * b[t];
  return sum;
}

template <typename Loader>
void KvScoresT(DType dtype, const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
               float scale, float* scores, int64_t lds) {
  const int64_t hd_vec = head_dim / kWidth * kWidth;
  for (int64_t p = 0; p < rows.count; ++p) {
    const uint8_t* row = rows.row(p);
    for (int64_t r = 0; r < num_q; ++r) {
      const float* qr = q + r * head_dim;
      __m256 acc0 = _mm256_setzero_ps();
      __m256 acc1 = _mm256_setzero_ps();
      int64_t t = 0;
      for (; t + 2 * kWidth <= hd_vec; t += 2 * kWidth) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + t), Loader::Load(row, t), acc0);
        acc1 =
            _mm256_fmadd_ps(_mm256_loadu_ps(qr + t + kWidth), Loader::Load(row, t + kWidth), acc1);
      }
      for (; t < hd_vec; t += kWidth)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + t), Loader::Load(row, t), acc0);
      float sum = ReduceAdd(_mm256_add_ps(acc0, acc1));
      for (; t < head_dim; ++t)
        sum += qr[t] * ScalarWeight(dtype, row, t);
      scores[r * lds + p] = scale * sum;
    }
  }
}

template <typename Loader>
void KvAccumulateT(DType dtype, const float* probs, int64_t lds, int64_t num_q, int64_t head_dim,
                   const KvRows& rows, float* acc) {
  const int64_t hd_vec = head_dim / kWidth * kWidth;
  for (int64_t p = 0; p < rows.count; ++p) {
    const uint8_t* row = rows.row(p);
    for (int64_t r = 0; r < num_q; ++r) {
      const float w = probs[r * lds + p];
      const __m256 wv = _mm256_set1_ps(w);
      float* acc_r = acc + r * head_dim;
      int64_t t = 0;
      for (; t < hd_vec; t += kWidth) {
        _mm256_storeu_ps(acc_r + t,
                         _mm256_fmadd_ps(wv, Loader::Load(row, t), _mm256_loadu_ps(acc_r + t)));
      }
      for (; t < head_dim; ++t)
        acc_r[t] += w * ScalarWeight(dtype, row, t);
    }
  }
}

void KvScores(DType kv_dtype, const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
              float scale, float* scores, int64_t lds) {
  switch (kv_dtype) {
    case DType::kF32:
      return KvScoresT<LoadF32>(kv_dtype, q, num_q, head_dim, rows, scale, scores, lds);
    case DType::kF16:
      return KvScoresT<LoadF16>(kv_dtype, q, num_q, head_dim, rows, scale, scores, lds);
    case DType::kBF16:
      return KvScoresT<LoadBf16>(kv_dtype, q, num_q, head_dim, rows, scale, scores, lds);
    case DType::kQ8_0:
    case DType::kI32:
      return;
  }
}

void KvAccumulate(DType kv_dtype, const float* probs, int64_t lds, int64_t num_q, int64_t head_dim,
                  const KvRows& rows, float* acc) {
  switch (kv_dtype) {
    case DType::kF32:
      return KvAccumulateT<LoadF32>(kv_dtype, probs, lds, num_q, head_dim, rows, acc);
    case DType::kF16:
      return KvAccumulateT<LoadF16>(kv_dtype, probs, lds, num_q, head_dim, rows, acc);
    case DType::kBF16:
      return KvAccumulateT<LoadBf16>(kv_dtype, probs, lds, num_q, head_dim, rows, acc);
    case DType::kQ8_0:
    case DType::kI32:
      return;
  }
}

// f32 -> bf16 bits in the low 16 bits of each lane, rounded like F32ToBf16.
__m256i RoundToBf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(is_nan));
}

void ToF32(DType dtype, const void* src, int64_t n, float* out) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  int64_t t = 0;
  switch (dtype) {
    case DType::kBF16:
      for (; t + kWidth <= n; t += kWidth)
        _mm256_storeu_ps(out + t, LoadBf16::Load(bytes, t));
      break;
    case DType::kF16:
      for (; t + kWidth <= n; t += kWidth)
        _mm256_storeu_ps(out + t, LoadF16::Load(bytes, t));
      break;
    case DType::kQ8_0:
      for (; t + kWidth <= n; t += kWidth)
        _mm256_storeu_ps(out + t, LoadQ8_0::Load(bytes, t));
      break;
    case DType::kF32:
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
      const __m256i r = RoundToBf16(_mm256_loadu_ps(src + t));
      const __m128i packed =
          _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h + t), packed);
    }
  } else if (dtype == DType::kF16) {
    for (; t + kWidth <= n; t += kWidth) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h + t),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + t), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  PortableKernels().from_f32(dtype, src + t, n - t,
                             static_cast<uint8_t*>(dst) + RowBytes(dtype, t));
}

void PackPanel(DType w_dtype, const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0,
               int64_t kc, float* panel) {
  PackPanelScalar(Avx2Kernels(), w_dtype, w, w_row_bytes, rows, t0, kc, panel);
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const IsaKernels& Avx2Kernels() {
  static constexpr IsaKernels kKernels = {
      &DotRows,  &GemmPanel,    &PackPanel,         &ToF32,       &FromF32, &Dot,
      &KvScores, &KvAccumulate, &SoftmaxStepScalar, &SwiGluScalar};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
