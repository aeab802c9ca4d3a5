// AVX-512 inner loops of paged attention (scores, softmax exponentials, the weighted sum
// of V rows) and of SwiGLU, part of Avx512Kernels(). Compiled for their target by the
// pragma below and reached only through that table.
//
// Scores come in two shapes. A few query vectors (decode: the query heads of one kv head)
// take 16 K rows at a time, each widened to f32 once for all of them, one accumulator per
// row and vector, and fold the 16 accumulators into one vector of scores
// (Fold2/Fold4/Fold16). Many query vectors (a tile of prefill rows) first transpose 16 K
// rows into dimension-major order, so that each score vector is a plain sum of K columns
// times broadcast query elements, with no reductions; the transpose is paid once per 16
// rows for all query vectors.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/cpu/internal/avx512_loaders.h"
#include "runtime/cpu/internal/avx512_transpose.h"
#include "runtime/cpu/internal/isa_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace switchyard::runtime::cpu {
namespace {

constexpr int64_t kWidth = 16;
// Query vectors from which scores go by columns: the transpose is shared by that many
// (decode brings a group of query heads, 1-8; prefill tiles about 16).
constexpr int64_t kMinColumnScoreQueries = 8;
// Query vectors from which ScoresByRows widens 16-bit K rows once for all of them. Measured
// (BM_AttentionDecodeBatch_F16, BM_AttentionDecodeShared_F16): staging made a shared prefix
// in cache ~1.4x faster with 30 vectors, but a decode group of 3 over rows from memory
// 13% slower.
constexpr int64_t kMinStagedQueries = 8;
// Query vectors per register tile: score tiles keep one accumulator per vector, value
// tiles 4 per vector (64 dimensions).
constexpr int kScoreTile = 8;
constexpr int kValueTile = 6;
// Head dimensions per pass of the value tile and of the transposed K block.
constexpr int64_t kDimBlock = 4 * kWidth;

// Per-lane products of one query vector and one K row over head_dim == 16 * NV, with
// q_at(v) and k_at(v) their v-th 16 values as f32. Every by-rows score goes through here,
// so a vector's sums are the same bits whichever loop widened its K rows.
template <int NV, typename QAt, typename KAt>
__attribute__((always_inline)) inline __m512 LaneProducts(const QAt& q_at, const KAt& k_at) {
  // Two chains, so that the FMAs of one row do not all wait on each other.
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v)
    acc[v % 2] = _mm512_fmadd_ps(q_at(v), k_at(v), acc[v % 2]);
  return _mm512_add_ps(acc[0], acc[1]);
}

// Per-lane products of q and one K row, summed over the head dimension: NV vectors of it
// with q already in registers (head_dim == 16 * NV), or any head_dim with NV == 0.
template <typename Loader, int NV>
__attribute__((always_inline)) inline __m512 RowProducts(const float* q, const __m512* qv,
                                                         int64_t head_dim, const uint8_t* row) {
  if constexpr (NV == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t t = 0; t < head_dim; t += kWidth) {
      const __mmask16 mask = TailMask(head_dim - t);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, q + t), Loader::Load(row, t, mask), acc);
    }
    return acc;
  } else {
    return LaneProducts<NV>([qv](int v) { return qv[v]; },
                            [row](int v) { return Loader::Load(row, v * kWidth); });
  }
}

// scores[r * lds + i] = scale * (q_r . K row group[i]) for the 16 rows of one group, r < num_q,
// stored in the lanes of `mask`.
template <typename Loader, int NV>
__attribute__((always_inline)) inline void ScoresOfGroup(const float* q, int64_t num_q,
                                                         int64_t head_dim,
                                                         const uint8_t* const* group, __m512 vscale,
                                                         float* scores, int64_t lds,
                                                         __mmask16 mask) {
  for (int64_t r = 0; r < num_q; ++r) {
    const float* qr = q + r * head_dim;
    __m512 qv[NV == 0 ? 1 : NV];
    for (int v = 0; v < NV; ++v)
      qv[v] = _mm512_loadu_ps(qr + v * kWidth);
    auto products = [&](int i) { return RowProducts<Loader, NV>(qr, qv, head_dim, group[i]); };
    // Folded as they are made, so that few vectors are live at once.
    auto quad = [&](int i) {
      return Fold4(Fold2(products(i), products(i + 1)), Fold2(products(i + 2), products(i + 3)));
    };
    const __m512 sums = Fold16(quad(0), quad(4), quad(8), quad(12));
    _mm512_mask_storeu_ps(scores + r * lds, mask, _mm512_mul_ps(sums, vscale));
  }
}

// ScoresOfGroup for a few query vectors (2 to kMinStagedQueries - 1: a decode row's group
// of query heads) with head_dim == 16 * NV: each K row is widened once, in registers, for
// all of them, where ScoresOfGroup widens it once per vector (vcvtph2ps costs more here
// than the FMAs). Widening into memory instead (ScoresByRows' staging) made rows that come
// from memory slower. Each vector's products and folds are ScoresOfGroup's, in its order.
template <typename Loader, int NV>
__attribute__((always_inline)) inline void ScoresOfGroupWidenedOnce(const float* q, int64_t num_q,
                                                                    const uint8_t* const* group,
                                                                    __m512 vscale, float* scores,
                                                                    int64_t lds, __mmask16 mask) {
  // Rows widened per pass, in 4 * NV registers or fewer; a pass folds them into a quad
  // (ScoresOfGroup's Fold4 of two Fold2s), or with 2 rows into half of one.
  constexpr int kRows = NV <= 4 ? 4 : 2;
  constexpr int kPasses = kWidth / kRows;
  __m512 folded[kMinStagedQueries][kPasses];
  for (int pass = 0; pass < kPasses; ++pass) {
    __m512 k[kRows][NV];
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        k[i][v] = Loader::Load(group[pass * kRows + i], v * kWidth);
    }
    for (int64_t r = 0; r < num_q; ++r) {
      const float* qr = q + r * NV * kWidth;
      auto products = [&](int i) {
        return LaneProducts<NV>([qr](int v) { return _mm512_loadu_ps(qr + v * kWidth); },
                                [&k, i](int v) { return k[i][v]; });
      };
      if constexpr (kRows == 4) {
        folded[r][pass] = Fold4(Fold2(products(0), products(1)), Fold2(products(2), products(3)));
      } else {
        folded[r][pass] = Fold2(products(0), products(1));
        if (pass % 2 == 1)
          folded[r][pass / 2] = Fold4(folded[r][pass - 1], folded[r][pass]);
      }
    }
  }
  for (int64_t r = 0; r < num_q; ++r) {
    const __m512 sums = Fold16(folded[r][0], folded[r][1], folded[r][2], folded[r][3]);
    _mm512_mask_storeu_ps(scores + r * lds, mask, _mm512_mul_ps(sums, vscale));
  }
}

// Scores of num_q query vectors against each K row. With many query vectors (a shared
// prefix's, kMinStagedQueries or more) and a 16-bit K with head_dim == 16 * NV, each 16 rows
// are first widened to f32 in a staging buffer, once for all vectors: the conversion, not
// the FMAs, bounds this loop over rows in cache, and it was paid once per query vector.
// Same arithmetic either way.
template <typename Loader, int NV>
void ScoresByRows(const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows, float scale,
                  float* scores, int64_t lds) {
  constexpr bool kStage = NV > 0 && !std::is_same_v<Loader, LoadF32>;
  alignas(64) float staged[kStage ? kWidth * NV * kWidth : 1];
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t p0 = 0; p0 < rows.count; p0 += kWidth) {
    const uint8_t* group[kWidth];
    rows.Gather(p0, kWidth, group);
    if constexpr (kStage) {
      if (num_q >= kMinStagedQueries) {
        for (int64_t i = 0; i < kWidth; ++i) {
          float* to = staged + i * NV * kWidth;
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v)
            _mm512_store_ps(to + v * kWidth, Loader::Load(group[i], v * kWidth));
          group[i] = reinterpret_cast<const uint8_t*>(to);
        }
        ScoresOfGroup<LoadF32, NV>(q, num_q, head_dim, group, vscale, scores + p0, lds,
                                   TailMask(rows.count - p0));
        continue;
      }
      if (num_q > 1) {  // and fewer than kMinStagedQueries, as the branch above took those
        ScoresOfGroupWidenedOnce<Loader, NV>(q, num_q, group, vscale, scores + p0, lds,
                                             TailMask(rows.count - p0));
        continue;
      }
    }
    ScoresOfGroup<Loader, NV>(q, num_q, head_dim, group, vscale, scores + p0, lds,
                              TailMask(rows.count - p0));
  }
}

// out[r * lds + c] (+)= scale * sum_{d < dims} q[r * head_dim + d] * kt[d * 16 + c] for
// r < NR and the lanes c in `mask`.
template <int NR>
void ScoreTile(const float* q, int64_t head_dim, const float* kt, int64_t dims, float scale,
               float* out, int64_t lds, __mmask16 mask, bool accumulate) {
  __m512 acc[NR];
  for (__m512& a : acc)
    a = _mm512_setzero_ps();
  for (int64_t d = 0; d < dims; ++d) {
    const __m512 column = _mm512_load_ps(kt + d * kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * head_dim + d]), column, acc[r]);
  }
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int r = 0; r < NR; ++r) {
    __m512 s = _mm512_mul_ps(acc[r], vscale);
    if (accumulate)
      s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mask, out + r * lds));
    _mm512_mask_storeu_ps(out + r * lds, mask, s);
  }
}

template <int NR = kScoreTile>
void ScoreTileN(int64_t nr, const float* q, int64_t head_dim, const float* kt, int64_t dims,
                float scale, float* out, int64_t lds, __mmask16 mask, bool accumulate) {
  if constexpr (NR > 0) {
    if (nr == NR)
      return ScoreTile<NR>(q, head_dim, kt, dims, scale, out, lds, mask, accumulate);
    ScoreTileN<NR - 1>(nr, q, head_dim, kt, dims, scale, out, lds, mask, accumulate);
  }
}

template <typename Loader>
void ScoresByColumns(const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
                     float scale, float* scores, int64_t lds) {
  // Rows p0 .. p0 + 15, dimensions t0 .. t0 + kDimBlock - 1: kt[d * 16 + i] = K_{p0+i}[t0+d].
  alignas(64) float kt[kDimBlock * kWidth];
  for (int64_t p0 = 0; p0 < rows.count; p0 += kWidth) {
    const uint8_t* group[kWidth];
    rows.Gather(p0, kWidth, group);
    const __mmask16 store_mask = TailMask(rows.count - p0);
    for (int64_t t0 = 0; t0 < head_dim; t0 += kDimBlock) {
      const int64_t dims = std::min(kDimBlock, head_dim - t0);
      for (int64_t c = 0; c < dims; c += kWidth) {
        const __mmask16 mask = TailMask(dims - c);
        __m512 r[kWidth];
        for (int64_t i = 0; i < kWidth; ++i)
          r[i] = Loader::Load(group[i], t0 + c, mask);
        Transpose16x16(r);
        for (int64_t j = 0; j < std::min(kWidth, dims - c); ++j)
          _mm512_store_ps(kt + (c + j) * kWidth, r[j]);
      }
      for (int64_t r0 = 0; r0 < num_q; r0 += kScoreTile) {
        ScoreTileN(std::min<int64_t>(kScoreTile, num_q - r0), q + r0 * head_dim + t0, head_dim, kt,
                   dims, scale, scores + r0 * lds + p0, lds, store_mask, t0 != 0);
      }
    }
  }
}

template <typename Loader>
void KvScoresT(const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows, float scale,
               float* scores, int64_t lds, bool by_columns) {
  if (by_columns)
    return ScoresByColumns<Loader>(q, num_q, head_dim, rows, scale, scores, lds);
  switch (head_dim) {
    case 64:
      return ScoresByRows<Loader, 4>(q, num_q, head_dim, rows, scale, scores, lds);
    case 128:
      return ScoresByRows<Loader, 8>(q, num_q, head_dim, rows, scale, scores, lds);
    default:
      return ScoresByRows<Loader, 0>(q, num_q, head_dim, rows, scale, scores, lds);
  }
}

// acc[r * head_dim + t] += sum_p probs[r * lds + p] * V_p[t] for r < NR: each V vector is
// loaded once for all NR query vectors, whose accumulators stay in registers over the rows.
template <typename Loader, int NR>
void ValueTile(const float* probs, int64_t lds, int64_t head_dim, const KvRows& rows, float* acc) {
  constexpr int kVecs = kDimBlock / kWidth;
  for (int64_t t0 = 0; t0 < head_dim; t0 += kDimBlock) {
    __mmask16 mask[kVecs];
    __m512 a[NR][kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      mask[v] = TailMask(head_dim - t0 - v * kWidth);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r)
        a[r][v] = _mm512_maskz_loadu_ps(mask[v], acc + r * head_dim + t0 + v * kWidth);
    }
    for (int64_t b = 0; b * rows.block_rows < rows.count; ++b) {
      const uint8_t* base = rows.blocks[b];
      const float* w = probs + b * rows.block_rows;
      const int64_t n = rows.rows_in_block(b);
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t* row = base + static_cast<size_t>(i) * rows.row_stride;
        __m512 values[kVecs];
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v)
          values[v] = Loader::Load(row, t0 + v * kWidth, mask[v]);
#pragma GCC unroll 8
        for (int r = 0; r < NR; ++r) {
          const __m512 wr = _mm512_set1_ps(w[r * lds + i]);
#pragma GCC unroll 4
          for (int v = 0; v < kVecs; ++v)
            a[r][v] = _mm512_fmadd_ps(wr, values[v], a[r][v]);
        }
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r)
        _mm512_mask_storeu_ps(acc + r * head_dim + t0 + v * kWidth, mask[v], a[r][v]);
    }
  }
}

template <typename Loader, int NR = kValueTile>
void ValueTileN(int64_t nr, const float* probs, int64_t lds, int64_t head_dim, const KvRows& rows,
                float* acc) {
  if constexpr (NR > 0) {
    if (nr == NR)
      return ValueTile<Loader, NR>(probs, lds, head_dim, rows, acc);
    ValueTileN<Loader, NR - 1>(nr, probs, lds, head_dim, rows, acc);
  }
}

template <typename Loader>
void KvAccumulateT(const float* probs, int64_t lds, int64_t num_q, int64_t head_dim,
                   const KvRows& rows, float* acc) {
  for (int64_t r0 = 0; r0 < num_q; r0 += kValueTile) {
    ValueTileN<Loader>(std::min<int64_t>(kValueTile, num_q - r0), probs + r0 * lds, lds, head_dim,
                       rows, acc + r0 * head_dim);
  }
}

void KvScores(DType kv_dtype, const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
              float scale, float* scores, int64_t lds, bool by_columns) {
  switch (kv_dtype) {
    case DType::kF32:
      return KvScoresT<LoadF32>(q, num_q, head_dim, rows, scale, scores, lds, by_columns);
    case DType::kF16:
      return KvScoresT<LoadF16>(q, num_q, head_dim, rows, scale, scores, lds, by_columns);
    case DType::kBF16:
      return KvScoresT<LoadBf16>(q, num_q, head_dim, rows, scale, scores, lds, by_columns);
    case DType::kQ8_0:
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
      return;
  }
}

void KvAccumulate(DType kv_dtype, const float* probs, int64_t lds, int64_t num_q, int64_t head_dim,
                  const KvRows& rows, float* acc) {
  switch (kv_dtype) {
    case DType::kF32:
      return KvAccumulateT<LoadF32>(probs, lds, num_q, head_dim, rows, acc);
    case DType::kF16:
      return KvAccumulateT<LoadF16>(probs, lds, num_q, head_dim, rows, acc);
    case DType::kBF16:
      return KvAccumulateT<LoadBf16>(probs, lds, num_q, head_dim, rows, acc);
    case DType::kQ8_0:
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
      return;
  }
}

// exp(x) as Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for
// precision), e^r = 1 + r + r^2 P(r) with P of degree 5, times 2^n by scalef. Relative
// error about 1e-7. Inputs are clamped to [-87, 88], where the result is still a normal
// float.
__m512 Exp(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 poly = _mm512_set1_ps(1.9875691500e-4f);
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.3981999507e-3f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(8.3334519073e-3f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(4.1665795894e-2f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.6666665459e-1f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e =
      _mm512_fmadd_ps(poly, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(e, n);
}

float SoftmaxStep(float* x, int64_t n, float* max) {
  __m512 m = _mm512_set1_ps(*max);
  for (int64_t t = 0; t < n; t += kWidth)
    m = _mm512_mask_max_ps(m, TailMask(n - t), m, _mm512_maskz_loadu_ps(TailMask(n - t), x + t));
  *max = _mm512_reduce_max_ps(m);
  const __m512 shift = _mm512_set1_ps(*max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t t = 0; t < n; t += kWidth) {
    const __mmask16 mask = TailMask(n - t);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + t), shift));
    _mm512_mask_storeu_ps(x + t, mask, e);
    sum = _mm512_mask_add_ps(sum, mask, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t t = 0; t < n; t += kWidth) {
    const __mmask16 mask = TailMask(n - t);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + t);
    const __m512 silu =
        _mm512_div_ps(g, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + t, mask, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(mask, up + t)));
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

void SetAvx512AttentionKernels(IsaKernels* kernels) {
  kernels->kv_scores = &KvScores;
  kernels->min_column_score_queries = kMinColumnScoreQueries;
  kernels->kv_accumulate = &KvAccumulate;
  kernels->softmax_step = &SoftmaxStep;
  kernels->swiglu = &SwiGlu;
}

}  // namespace switchyard::runtime::cpu
