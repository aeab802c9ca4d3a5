// AVX2 inner loops of paged attention (scores, softmax exponentials, the weighted sum of V
// rows) and of SwiGLU, part of Avx2Kernels(). Compiled for their target by the pragma below
// and reached only through that table. The shapes follow the AVX-512 loops
// (isa_avx512_attention.cc) at half the width:
//
// Few query vectors (decode: the query heads of one kv head) score 4 or 8 K rows at a time
// against up to 3 of them, each K vector converted once for all 3, one accumulator per
// (query, row) folded into scores by horizontal adds. Many query vectors (a tile of
// prefill rows) first transpose 16 K rows into dimension-major order, then each pair of
// score vectors is a sum of K columns times broadcast query elements: a 6 x 16 register
// tile like the GEMM's, the transpose paid once for all query vectors.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/cpu/internal/avx2_loaders.h"
#include "runtime/cpu/internal/avx2_transpose.h"
#include "runtime/cpu/internal/isa_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace switchyard::runtime::cpu {
namespace {

constexpr int64_t kWidth = 8;
// K rows per transposed block of the column form: two vectors of scores per query.
constexpr int64_t kColumnRows = 2 * kWidth;
// Query vectors from which scores go by columns (decode brings 1-8, prefill tiles ~16).
constexpr int64_t kMinColumnScoreQueries = 8;
// Query vectors per register tile, for scores and for values (2 vectors each: 12 of the
// 16 registers hold accumulators).
constexpr int kTile = 6;
// Head dimensions per transposed K block.
constexpr int64_t kDimBlock = 64;

// Lane i of the result: the lane sum of a[i].
__attribute__((always_inline)) inline __m256 Fold8(const __m256 a[8]) {
  const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                       _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// Lanes of v under mask stored at p, with a plain store when all 8 are (full): masked
// stores (vmaskmovps) are slow on AMD, so they are kept to the tails.
__attribute__((always_inline)) inline void StoreLanes(float* p, __m256 v, __m256i mask, bool full) {
  if (full) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, mask, v);
  }
}

// acc[r][p] += q_r[t, t + 8) * K_p[t, t + 8) lane by lane, for the `left` (all 8 when
// left >= 8) dimensions from t on.
template <typename Loader, int NR, int P, bool kFull>
__attribute__((always_inline)) inline void ScoreRowStep(const float* q, int64_t head_dim,
                                                        const uint8_t* const group[P], int64_t t,
                                                        int64_t left, __m256 (&acc)[NR][P]) {
  __m256 qv[NR];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    qv[r] = kFull ? _mm256_loadu_ps(q + r * head_dim + t)
                  : _mm256_maskload_ps(q + r * head_dim + t, Avx2TailMask(left));
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
    const __m256 kv = kFull ? Loader::Load(group[p], t) : Loader::Load(group[p], t, left);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r)
      acc[r][p] = _mm256_fmadd_ps(qv[r], kv, acc[r][p]);
  }
}

// scores[r * lds + p] = scale * (q_r . K_p) for query vectors r < NR and the P K rows
// `group`, stored for p < valid. Each K vector is converted once for all NR query vectors
// (GQA decode: the heads of one kv head); NR x P accumulators of one chain each.
template <typename Loader, int NR, int P>
void ScoreRowTile(const float* q, int64_t head_dim, const uint8_t* const group[P], __m256 vscale,
                  float* scores, int64_t lds, int64_t valid) {
  static_assert(P == 4 || P == kWidth);
  __m256 acc[NR][P];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p)
      acc[r][p] = _mm256_setzero_ps();
  }
  int64_t t = 0;
  for (; t + kWidth <= head_dim; t += kWidth)
    ScoreRowStep<Loader, NR, P, true>(q, head_dim, group, t, kWidth, acc);
  if (t < head_dim)
    ScoreRowStep<Loader, NR, P, false>(q, head_dim, group, t, head_dim - t, acc);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    float* out = scores + r * lds;
    if constexpr (P == kWidth) {
      StoreLanes(out, _mm256_mul_ps(Fold8(acc[r]), vscale), Avx2TailMask(valid), valid >= P);
    } else {
      const __m128 s = _mm_mul_ps(Avx2ReduceAdd4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]),
                                  _mm256_castps256_ps128(vscale));
      if (valid >= P) {
        _mm_storeu_ps(out, s);
      } else {
        _mm_maskstore_ps(out, _mm256_castsi256_si128(Avx2TailMask(valid)), s);
      }
    }
  }
}

// Query vectors per row tile: 3 x 4 accumulators, the query and the K vectors fill the 16
// registers.
constexpr int64_t kRowTileQueries = 3;

// Query vectors from which ScoresByRows widens 16-bit K rows once for all of them (a shared
// prefix's chunk) instead of once per row tile, as the AVX-512 path does; head dimensions
// up to kMaxStagedHeadDim.
constexpr int64_t kMinStagedQueries = 8;
constexpr int64_t kMaxStagedHeadDim = 256;

// The scores of every query vector against the 8 K rows of `group` (`valid` of them real).
template <typename Loader>
void ScoresOfGroup(const float* q, int64_t num_q, int64_t head_dim, const uint8_t* const* group,
                   __m256 vscale, float* scores, int64_t lds, int64_t valid) {
  for (int64_t r0 = 0; r0 < num_q; r0 += kRowTileQueries) {
    const float* qr = q + r0 * head_dim;
    float* out = scores + r0 * lds;
    switch (std::min(kRowTileQueries, num_q - r0)) {
      case 1:
        ScoreRowTile<Loader, 1, kWidth>(qr, head_dim, group, vscale, out, lds, valid);
        break;
      case 2:
        ScoreRowTile<Loader, 2, 4>(qr, head_dim, group, vscale, out, lds, valid);
        if (valid > 4)
          ScoreRowTile<Loader, 2, 4>(qr, head_dim, group + 4, vscale, out + 4, lds, valid - 4);
        break;
      default:
        ScoreRowTile<Loader, 3, 4>(qr, head_dim, group, vscale, out, lds, valid);
        if (valid > 4)
          ScoreRowTile<Loader, 3, 4>(qr, head_dim, group + 4, vscale, out + 4, lds, valid - 4);
        break;
    }
  }
}

template <typename Loader>
void ScoresByRows(const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows, float scale,
                  float* scores, int64_t lds) {
  const __m256 vscale = _mm256_set1_ps(scale);
  const bool stage = !std::is_same_v<Loader, Avx2LoadF32> && num_q >= kMinStagedQueries &&
                     head_dim <= kMaxStagedHeadDim;
  alignas(32) float staged[kWidth * kMaxStagedHeadDim];
  for (int64_t p0 = 0; p0 < rows.count; p0 += kWidth) {
    const uint8_t* group[kWidth];
    rows.Gather(p0, kWidth, group);
    const int64_t valid = rows.count - p0;
    if (stage) {
      for (int64_t i = 0; i < kWidth; ++i) {
        float* to = staged + i * head_dim;
        for (int64_t t = 0; t < head_dim; t += kWidth) {
          const int64_t left = head_dim - t;
          const __m256 v = Loader::Load(group[i], t, left);
          if (left >= kWidth)
            _mm256_storeu_ps(to + t, v);
          else
            _mm256_maskstore_ps(to + t, Avx2TailMask(left), v);
        }
        group[i] = reinterpret_cast<const uint8_t*>(to);
      }
      ScoresOfGroup<Avx2LoadF32>(q, num_q, head_dim, group, vscale, scores + p0, lds, valid);
    } else {
      ScoresOfGroup<Loader>(q, num_q, head_dim, group, vscale, scores + p0, lds, valid);
    }
  }
}

// out[r * lds + c] (+)= scale * sum_{d < dims} q[r * head_dim + d] * kt[d * 16 + c] for
// r < NR and c < 16, storing only lanes under the masks (all of them when full).
template <int NR>
void ScoreTile(const float* q, int64_t head_dim, const float* kt, int64_t dims, float scale,
               float* out, int64_t lds, __m256i mask0, __m256i mask1, bool full, bool accumulate) {
  __m256 acc[NR][2];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < dims; ++d) {
    const __m256 c0 = _mm256_load_ps(kt + d * kColumnRows);
    const __m256 c1 = _mm256_load_ps(kt + d * kColumnRows + kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m256 qd = _mm256_broadcast_ss(q + r * head_dim + d);
      acc[r][0] = _mm256_fmadd_ps(qd, c0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(qd, c1, acc[r][1]);
    }
  }
  const __m256 vscale = _mm256_set1_ps(scale);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    float* o = out + r * lds;
    __m256 s0 = _mm256_mul_ps(acc[r][0], vscale);
    __m256 s1 = _mm256_mul_ps(acc[r][1], vscale);
    if (accumulate) {
      s0 = _mm256_add_ps(s0, _mm256_maskload_ps(o, mask0));
      s1 = _mm256_add_ps(s1, _mm256_maskload_ps(o + kWidth, mask1));
    }
    StoreLanes(o, s0, mask0, full);
    StoreLanes(o + kWidth, s1, mask1, full);
  }
}

template <int NR = kTile>
void ScoreTileN(int64_t nr, const float* q, int64_t head_dim, const float* kt, int64_t dims,
                float scale, float* out, int64_t lds, __m256i mask0, __m256i mask1, bool full,
                bool accumulate) {
  if constexpr (NR > 0) {
    if (nr == NR) {
      return ScoreTile<NR>(q, head_dim, kt, dims, scale, out, lds, mask0, mask1, full, accumulate);
    }
    ScoreTileN<NR - 1>(nr, q, head_dim, kt, dims, scale, out, lds, mask0, mask1, full, accumulate);
  }
}

template <typename Loader>
void ScoresByColumns(const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
                     float scale, float* scores, int64_t lds) {
  // Rows p0 .. p0 + 15, dimensions t0 .. t0 + kDimBlock - 1: kt[d * 16 + i] = K_{p0+i}[t0+d].
  alignas(32) float kt[kDimBlock * kColumnRows];
  for (int64_t p0 = 0; p0 < rows.count; p0 += kColumnRows) {
    const uint8_t* group[kColumnRows];
    rows.Gather(p0, kColumnRows, group);
    const __m256i mask0 = Avx2TailMask(rows.count - p0);
    const __m256i mask1 = Avx2TailMask(rows.count - p0 - kWidth);
    const bool full = rows.count - p0 >= kColumnRows;
    for (int64_t t0 = 0; t0 < head_dim; t0 += kDimBlock) {
      const int64_t dims = std::min(kDimBlock, head_dim - t0);
      for (int64_t c = 0; c < dims; c += kWidth) {
        for (int64_t half = 0; half < 2; ++half) {
          __m256 r[kWidth];
          for (int64_t i = 0; i < kWidth; ++i)
            r[i] = Loader::Load(group[half * kWidth + i], t0 + c, dims - c);
          Transpose8x8(r);
          for (int64_t j = 0; j < std::min(kWidth, dims - c); ++j)
            _mm256_store_ps(kt + (c + j) * kColumnRows + half * kWidth, r[j]);
        }
      }
      for (int64_t r0 = 0; r0 < num_q; r0 += kTile) {
        ScoreTileN(std::min<int64_t>(kTile, num_q - r0), q + r0 * head_dim + t0, head_dim, kt, dims,
                   scale, scores + r0 * lds + p0, lds, mask0, mask1, full, t0 != 0);
      }
    }
  }
}

template <typename Loader>
void KvScoresT(const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows, float scale,
               float* scores, int64_t lds, bool by_columns) {
  if (by_columns)
    return ScoresByColumns<Loader>(q, num_q, head_dim, rows, scale, scores, lds);
  ScoresByRows<Loader>(q, num_q, head_dim, rows, scale, scores, lds);
}

// a[r][h] += sum_p probs[r * lds + p] * V_p[t0 + 8h, t0 + 8h + 8) for r < NR over all
// rows p, reading only the `left` (all 16 when left >= 16) dimensions from t0 on.
template <typename Loader, int NR, bool kFull>
__attribute__((always_inline)) inline void ValueRows(const float* probs, int64_t lds,
                                                     const KvRows& rows, int64_t t0, int64_t left,
                                                     __m256 (&a)[NR][2]) {
  for (int64_t b = 0; b * rows.block_rows < rows.count; ++b) {
    const uint8_t* base = rows.blocks[b];
    const float* w = probs + b * rows.block_rows;
    const int64_t n = rows.rows_in_block(b);
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* row = base + static_cast<size_t>(i) * rows.row_stride;
      __m256 v0;
      __m256 v1;
      if constexpr (kFull) {
        v0 = Loader::Load(row, t0);
        v1 = Loader::Load(row, t0 + kWidth);
      } else {
        v0 = Loader::Load(row, t0, left);
        v1 = left > kWidth ? Loader::Load(row, t0 + kWidth, left - kWidth) : _mm256_setzero_ps();
      }
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const __m256 wr = _mm256_broadcast_ss(w + r * lds + i);
        a[r][0] = _mm256_fmadd_ps(wr, v0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(wr, v1, a[r][1]);
      }
    }
  }
}

// acc[r * head_dim + t] += sum_p probs[r * lds + p] * V_p[t] for r < NR, 16 dimensions per
// pass: each V vector is loaded once for all NR query vectors, whose accumulators stay in
// registers over the rows.
template <typename Loader, int NR>
void ValueTile(const float* probs, int64_t lds, int64_t head_dim, const KvRows& rows, float* acc) {
  for (int64_t t0 = 0; t0 < head_dim; t0 += 2 * kWidth) {
    const int64_t left = head_dim - t0;
    const __m256i mask0 = Avx2TailMask(left);
    const __m256i mask1 = Avx2TailMask(left - kWidth);
    __m256 a[NR][2];
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      a[r][0] = _mm256_maskload_ps(acc + r * head_dim + t0, mask0);
      a[r][1] = _mm256_maskload_ps(acc + r * head_dim + t0 + kWidth, mask1);
    }
    if (left >= 2 * kWidth) {
      ValueRows<Loader, NR, true>(probs, lds, rows, t0, left, a);
    } else {
      ValueRows<Loader, NR, false>(probs, lds, rows, t0, left, a);
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      StoreLanes(acc + r * head_dim + t0, a[r][0], mask0, left >= 2 * kWidth);
      StoreLanes(acc + r * head_dim + t0 + kWidth, a[r][1], mask1, left >= 2 * kWidth);
    }
  }
}

template <typename Loader, int NR = kTile>
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
  for (int64_t r0 = 0; r0 < num_q; r0 += kTile) {
    ValueTileN<Loader>(std::min<int64_t>(kTile, num_q - r0), probs + r0 * lds, lds, head_dim, rows,
                       acc + r0 * head_dim);
  }
}

void KvScores(DType kv_dtype, const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
              float scale, float* scores, int64_t lds, bool by_columns) {
  switch (kv_dtype) {
    case DType::kF32:
      return KvScoresT<Avx2LoadF32>(q, num_q, head_dim, rows, scale, scores, lds, by_columns);
    case DType::kF16:
      return KvScoresT<Avx2LoadF16>(q, num_q, head_dim, rows, scale, scores, lds, by_columns);
    case DType::kBF16:
      return KvScoresT<Avx2LoadBf16>(q, num_q, head_dim, rows, scale, scores, lds, by_columns);
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
      return KvAccumulateT<Avx2LoadF32>(probs, lds, num_q, head_dim, rows, acc);
    case DType::kF16:
      return KvAccumulateT<Avx2LoadF16>(probs, lds, num_q, head_dim, rows, acc);
    case DType::kBF16:
      return KvAccumulateT<Avx2LoadBf16>(probs, lds, num_q, head_dim, rows, acc);
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

// exp(x) as Cephes' expf (as the AVX-512 Exp): x = n ln2 + r, e^r by a degree-5
// polynomial, times 2^n built in the exponent bits. Inputs clamped to [-87, 88], where n
// stays within the normal exponents.
__attribute__((always_inline)) inline __m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 poly = _mm256_set1_ps(1.9875691500e-4f);
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.3981999507e-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(8.3334519073e-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(4.1665795894e-2f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.6666665459e-1f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 e =
      _mm256_fmadd_ps(poly, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
}

float SoftmaxStep(float* x, int64_t n, float* max) {
  const int64_t n_vec = n / kWidth * kWidth;
  __m256 m = _mm256_set1_ps(*max);
  for (int64_t t = 0; t < n_vec; t += kWidth)
    m = _mm256_max_ps(m, _mm256_loadu_ps(x + t));
  if (n_vec < n) {
    // Lanes past n load zero: replace them by the running max, which changes nothing.
    const __m256i mask = Avx2TailMask(n - n_vec);
    m = _mm256_max_ps(
        m, _mm256_blendv_ps(m, _mm256_maskload_ps(x + n_vec, mask), _mm256_castsi256_ps(mask)));
  }
  *max = Avx2ReduceMax(m);
  const __m256 shift = _mm256_set1_ps(*max);
  __m256 sum = _mm256_setzero_ps();
  // Masked stores only for the tail (StoreLanes).
  for (int64_t t = 0; t < n_vec; t += kWidth) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + t), shift));
    _mm256_storeu_ps(x + t, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (n_vec < n) {
    const __m256i mask = Avx2TailMask(n - n_vec);
    const __m256 e = _mm256_and_ps(Exp(_mm256_sub_ps(_mm256_maskload_ps(x + n_vec, mask), shift)),
                                   _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(x + n_vec, mask, e);
    sum = _mm256_add_ps(sum, e);
  }
  return Avx2ReduceAdd(sum);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t t = 0; t < n; t += kWidth) {
    const __m256i mask = Avx2TailMask(n - t);
    const __m256 g = _mm256_maskload_ps(gate + t, mask);
    const __m256 silu =
        _mm256_div_ps(g, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    StoreLanes(out + t, _mm256_mul_ps(silu, _mm256_maskload_ps(up + t, mask)), mask,
               n - t >= kWidth);
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

void SetAvx2AttentionKernels(IsaKernels* kernels) {
  kernels->kv_scores = &KvScores;
  kernels->min_column_score_queries = kMinColumnScoreQueries;
  kernels->kv_accumulate = &KvAccumulate;
  kernels->softmax_step = &SoftmaxStep;
  kernels->swiglu = &SwiGlu;
}

}  // namespace switchyard::runtime::cpu
