// AVX2 + FMA + F16C inner loops, for x86 CPUs without AVX-512. Compiled for that target by
// the pragma below and reached only through Avx2Kernels(), which callers use only after
// CpuSupportsIsa(kAvx2) said yes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/avx2_loaders.h"
#include "runtime/cpu/internal/avx2_transpose.h"
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

// Q8_0 weights, 8 at element t (t % 8 == 0), as f32.
struct LoadQ8_0 {
  static __m256 Load(const uint8_t* row, int64_t t) {
    const uint8_t* block = row + (t / kQ8_0BlockElems) * kQ8_0BlockBytes;
    int64_t q8;
    std::memcpy(&q8, block + 2 + t % 32, sizeof(q8));
    const __m256i q = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(q8));
    return _mm256_mul_ps(_mm256_set1_ps(Avx2Q8BlockScale(block)), _mm256_cvtepi32_ps(q));
  }
};

float ScalarWeight(DType dtype, const uint8_t* row, int64_t t) {
  float f;
  DequantizeRow(dtype, row + RowBytes(dtype, t), 1, &f);
  return f;
}

// Tile shape of the streaming dot products: activation rows x weight rows.
constexpr int kDotTileRows = 4;
constexpr int kDotTileWeights = 3;
// Weight bytes per block of rows that every group of activation rows passes over while it
// stays in L1 (at least one tile of rows).
constexpr size_t kDotBlockBytes = size_t{16} * 1024;

// acc[i][c] += x_i[t, t + 8) * w_{j+c}[t, t + 8) lane by lane (rows[c] = w_{j+c}).
template <int NA, int NB, typename Loader>
__attribute__((always_inline)) inline void DotTileStep(const float* x, int64_t k,
                                                       const uint8_t* const (&rows)[NB], int64_t t,
                                                       size_t prefetch, __m256 (&acc)[NA][NB]) {
  __m256 wv[NB];
#pragma GCC unroll 4
  for (int c = 0; c < NB; ++c) {
    _mm_prefetch(reinterpret_cast<const char*>(rows[c] + prefetch), _MM_HINT_T0);
    wv[c] = Loader::Load(rows[c], t);
  }
#pragma GCC unroll 4
  for (int i = 0; i < NA; ++i) {
    const __m256 xv = _mm256_loadu_ps(x + i * k + t);
#pragma GCC unroll 4
    for (int c = 0; c < NB; ++c)
      acc[i][c] = _mm256_fmadd_ps(xv, wv[c], acc[i][c]);
  }
}

// out[i * ldo + j + c] = x_i . w_{j+c} for NA activation rows (x_i at x + i * k) and NB
// weight rows from j. Each weight vector is converted once for the NA rows and each
// activation vector loaded once for the NB weight rows: at 4 x 3 the 12 accumulators, 3
// weight vectors and one activation vector fill the 16 registers, and the loop issues 7
// loads per 12 FMAs (one weight row at a time took 5 per 4). U interleaved sets of
// accumulators make U * NA * NB independent FMA chains (a 1 x 1 tile needs 2). Each
// weight row is prefetched kAvx2PrefetchRows rows ahead.
template <int NA, int NB, int U, typename Loader>
__attribute__((always_inline)) inline void DotTile(DType dtype, const float* x, int64_t k,
                                                   const uint8_t* w, size_t w_row_bytes, int64_t j,
                                                   float* out, int64_t ldo) {
  const uint8_t* rows[NB];
#pragma GCC unroll 4
  for (int c = 0; c < NB; ++c)
    rows[c] = w + static_cast<size_t>(j + c) * w_row_bytes;
  // The unroll pragmas keep the accumulators in registers: without them GCC keeps the
  // arrays on the stack and every FMA waits on a store and a reload.
  __m256 acc[U][NA][NB];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
#pragma GCC unroll 4
    for (int i = 0; i < NA; ++i) {
#pragma GCC unroll 4
      for (int c = 0; c < NB; ++c)
        acc[u][i][c] = _mm256_setzero_ps();
    }
  }
  const int64_t k_vec = k / kWidth * kWidth;
  // Weight bytes per kWidth elements (Q8_0's rounded down: close enough for prefetching).
  const size_t step = RowBytes(dtype, kQ8_0BlockElems) / (kQ8_0BlockElems / kWidth);
  size_t prefetch = kAvx2PrefetchRows * w_row_bytes;
  int64_t t = 0;
  for (; t + U * kWidth <= k_vec; t += U * kWidth) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u, prefetch += step)
      DotTileStep<NA, NB, Loader>(x, k, rows, t + u * kWidth, prefetch, acc[u]);
  }
  for (; t < k_vec; t += kWidth, prefetch += step)
    DotTileStep<NA, NB, Loader>(x, k, rows, t, prefetch, acc[0]);
#pragma GCC unroll 4
  for (int i = 0; i < NA; ++i) {
#pragma GCC unroll 4
    for (int c = 0; c < NB; ++c) {
#pragma GCC unroll 4
      for (int u = 1; u < U; ++u)
        acc[0][i][c] = _mm256_add_ps(acc[0][i][c], acc[u][i][c]);
    }
    // Unused lanes of the reduction reuse acc[0][i][0]; their sums are not stored.
    alignas(16) float sums[4];
    _mm_store_ps(sums, Avx2ReduceAdd4(acc[0][i][0], acc[0][i][NB > 1 ? 1 : 0],
                                      acc[0][i][NB > 2 ? 2 : 0], acc[0][i][0]));
#pragma GCC unroll 4
    for (int c = 0; c < NB; ++c) {
      float sum = sums[c];
      for (int64_t tt = k_vec; tt < k; ++tt)
        sum += x[i * k + tt] * ScalarWeight(dtype, rows[c], tt);
      out[i * ldo + j + c] = sum;
    }
  }
}

// DotTile for NA activation rows over weight rows [j_begin, j_end). One activation row
// (batch-1 decode) takes one weight row at a time, so that the weights are read as one
// sequential stream, which the hardware prefetchers follow best.
template <int NA, typename Loader>
void DotRowBlock(DType dtype, const float* x, int64_t k, const uint8_t* w, size_t w_row_bytes,
                 int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  if constexpr (NA == 1) {
    for (int64_t j = j_begin; j < j_end; ++j)
      DotTile<1, 1, 2, Loader>(dtype, x, k, w, w_row_bytes, j, out, ldo);
  } else {
    int64_t j = j_begin;
    for (; j + kDotTileWeights <= j_end; j += kDotTileWeights)
      DotTile<NA, kDotTileWeights, 1, Loader>(dtype, x, k, w, w_row_bytes, j, out, ldo);
    if (j_end - j == 2) {
      DotTile<NA, 2, 1, Loader>(dtype, x, k, w, w_row_bytes, j, out, ldo);
    } else if (j_end - j == 1) {
      DotTile<NA, 1, 1, Loader>(dtype, x, k, w, w_row_bytes, j, out, ldo);
    }
  }
}

// Weight rows go in blocks small enough to stay in L1 while every group of activation
// rows passes over them, so the weights stream from memory once whatever n is.
template <typename Loader>
void DotRowsLoader(DType dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  const int64_t block_rows =
      std::max<int64_t>(1, static_cast<int64_t>(kDotBlockBytes / std::max<size_t>(1, w_row_bytes)) /
                               kDotTileWeights) *
      kDotTileWeights;
  for (int64_t j0 = m_begin; j0 < m_end; j0 += block_rows) {
    const int64_t j1 = std::min(m_end, j0 + block_rows);
    int64_t i = 0;
    for (; i + kDotTileRows <= n; i += kDotTileRows) {
      DotRowBlock<kDotTileRows, Loader>(dtype, x + i * k, k, w, w_row_bytes, j0, j1, out + i * ldo,
                                        ldo);
    }
    const float* xi = x + i * k;
    float* oi = out + i * ldo;
    switch (n - i) {
      case 3:
        DotRowBlock<3, Loader>(dtype, xi, k, w, w_row_bytes, j0, j1, oi, ldo);
        break;
      case 2:
        DotRowBlock<2, Loader>(dtype, xi, k, w, w_row_bytes, j0, j1, oi, ldo);
        break;
      case 1:
        DotRowBlock<1, Loader>(dtype, xi, k, w, w_row_bytes, j0, j1, oi, ldo);
        break;
      default:
        break;
    }
  }
}

void DotRows(DType w_dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  switch (w_dtype) {
    case DType::kF32:
      return DotRowsLoader<Avx2LoadF32>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kBF16:
      return DotRowsLoader<Avx2LoadBf16>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out,
                                         ldo);
    case DType::kF16:
      return DotRowsLoader<Avx2LoadF16>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
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

// MR activation rows x 16 panel columns (the half of the panel at `panel`): 2*MR
// accumulators, two panel loads and MR broadcasts per k step, so the FMAs, not the loads,
// bound the loop (6 x 16 fills 12 of the 16 registers).
template <int MR>
void GemmTile(const float* a, int64_t lda, const float* panel, int64_t kc, float* out, int64_t ldo,
              int64_t cols, bool accumulate) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t t = 0; t < kc; ++t) {
    const __m256 b0 = _mm256_load_ps(panel + t * kPanelRows);
    const __m256 b1 = _mm256_load_ps(panel + t * kPanelRows + kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + t);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* o = out + r * ldo;
    if (cols == 2 * kWidth) {
      if (accumulate) {
        acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_loadu_ps(o));
        acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_loadu_ps(o + kWidth));
      }
      _mm256_storeu_ps(o, acc[r][0]);
      _mm256_storeu_ps(o + kWidth, acc[r][1]);
      continue;
    }
    float tile[2 * kWidth];
    _mm256_storeu_ps(tile, acc[r][0]);
    _mm256_storeu_ps(tile + kWidth, acc[r][1]);
    for (int64_t c = 0; c < cols; ++c)
      o[c] = accumulate ? o[c] + tile[c] : tile[c];
  }
}

template <int MR>
void GemmRows(const float* a, int64_t lda, const float* panel, int64_t kc, float* out, int64_t ldo,
              int64_t cols, bool accumulate) {
  for (int64_t c0 = 0; c0 < cols; c0 += 2 * kWidth) {
    GemmTile<MR>(a, lda, panel + c0, kc, out + c0, ldo, std::min<int64_t>(2 * kWidth, cols - c0),
                 accumulate);
  }
}

void GemmPanel(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc, float* out,
               int64_t ldo, int64_t cols, bool accumulate) {
  constexpr int kTileRows = 6;
  int64_t i = 0;
  for (; i + kTileRows <= n; i += kTileRows)
    GemmRows<kTileRows>(a + i * lda, lda, panel, kc, out + i * ldo, ldo, cols, accumulate);
  a += i * lda;
  out += i * ldo;
  switch (n - i) {
    case 5:
      return GemmRows<5>(a, lda, panel, kc, out, ldo, cols, accumulate);
    case 4:
      return GemmRows<4>(a, lda, panel, kc, out, ldo, cols, accumulate);
    case 3:
      return GemmRows<3>(a, lda, panel, kc, out, ldo, cols, accumulate);
    case 2:
      return GemmRows<2>(a, lda, panel, kc, out, ldo, cols, accumulate);
    case 1:
      return GemmRows<1>(a, lda, panel, kc, out, ldo, cols, accumulate);
    default:
      return;
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
  float sum = Avx2ReduceAdd(_mm256_add_ps(acc0, acc1));
  for (; t < len; ++t)
    sum += a[t] * b[t];
  return sum;
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
        _mm256_storeu_ps(out + t, Avx2LoadBf16::Load(bytes, t));
      break;
    case DType::kF16:
      for (; t + kWidth <= n; t += kWidth)
        _mm256_storeu_ps(out + t, Avx2LoadF16::Load(bytes, t));
      break;
    case DType::kQ8_0:
      for (; t + kWidth <= n; t += kWidth)
        _mm256_storeu_ps(out + t, LoadQ8_0::Load(bytes, t));
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

// 8 x 8 tiles: rows converted with the dtype's loader, transposed in registers.
template <typename Loader>
void PackPanelLoader(DType dtype, const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0,
                     int64_t kc, float* panel) {
  const int64_t kc_vec = kc / kWidth * kWidth;
  const size_t col_offset = RowBytes(dtype, t0);
  for (int64_t g = 0; g < kPanelRows; g += kWidth) {
    for (int64_t t = 0; t < kc_vec; t += kWidth) {
      __m256 r[kWidth];
      for (int64_t i = 0; i < kWidth; ++i) {
        r[i] = g + i < rows
                   ? Loader::Load(w + static_cast<size_t>(g + i) * w_row_bytes + col_offset, t)
                   : _mm256_setzero_ps();
      }
      Transpose8x8(r);
      for (int64_t c = 0; c < kWidth; ++c)
        _mm256_store_ps(panel + (t + c) * kPanelRows + g, r[c]);
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
      return PackPanelLoader<Avx2LoadF32>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kBF16:
      return PackPanelLoader<Avx2LoadBf16>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
    case DType::kF16:
      return PackPanelLoader<Avx2LoadF16>(w_dtype, w, w_row_bytes, rows, t0, kc, panel);
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
#pragma GCC pop_options
#endif

const IsaKernels& Avx2Kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels k{};
    k.dot_rows = &DotRows;
    k.gemm_panel = &GemmPanel;
    k.pack_panel = &PackPanel;
    k.to_f32 = &ToF32;
    k.from_f32 = &FromF32;
    k.dot = &Dot;
    k.max_streaming_rows = kAvx2StreamingRows;
    SetAvx2AttentionKernels(&k);
    return k;
  }();
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
