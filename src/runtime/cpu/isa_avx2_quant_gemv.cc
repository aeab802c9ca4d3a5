// The direct decode GEMV of GGML quantized weights (quant_gemv.h) on AVX2, for CPUs
// without AVX-512 VNNI: each chunk of a group's q values is unpacked from the weight bytes
// in registers (quant_decode.h's ChunkQ) and goes straight into vpmaddubsw (unsigned
// weight x signed activation byte pairs, which cannot saturate: 2 * 63 * 127 < 2^15) and
// vpmaddwd, whose int32 lanes (4 products, one sub-block) are scaled by the sub-block's
// weight scale and the activations' chunk scale; the mins come off per group. Several
// weight rows share each activation load.
#include <immintrin.h>

#include <cstdint>

#include "runtime/cpu/internal/avx2_loaders.h"
#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/cpu/internal/quant_gemv.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace switchyard::runtime::cpu {
namespace {

// Weight rows per tile: each activation load serves this many rows (16 registers: more
// rows spill).
constexpr int kTileRows = 2;

// acc[r][a] += the dot of group g of weight row r (at group[r]) with activation row i0 + a,
// over the group's first `chunks` chunks (the rest are zero).
template <DType kType, int R, int N>
inline void AddGroup(const uint8_t* const* group, const QuantActivations& x, int64_t i0, int64_t g,
                     int64_t chunks, __m256 acc[R][N]) {
  const int64_t lds = x.ldq / 4;
  const int64_t ldm = x.ldq / 16;
  const __m256i ones = _mm256_set1_epi16(1);
  GroupScales scales[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    scales[r] = GroupScalesOf<kType>(group[r]);
#pragma GCC unroll 8
  for (int64_t c = 0; c < kGroupChunks; ++c) {
    if (c == chunks)
      break;
    // Lanes 0-3 of chunk c are sub-block 2 c, lanes 4-7 sub-block 2 c + 1.
    const int h = 2 * static_cast<int>(c % 4);
    const __m256i spread = _mm256_setr_epi32(h, h, h, h, h + 1, h + 1, h + 1, h + 1);
    __m256i w[R];
    __m256 ws[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      w[r] = quant_decode::ChunkQ<kType>(group[r], c);
      ws[r] = _mm256_permutevar8x32_ps(scales[r].s[c / 4], spread);
    }
#pragma GCC unroll 8
    for (int a = 0; a < N; ++a) {
      const int64_t i = i0 + a;
      const __m256i xq = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(x.q + i * x.ldq + g * kGroupElems + 32 * c));
      const __m256 xs = _mm256_loadu_ps(x.s + i * lds + g * 64 + 8 * c);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w[r], xq), ones);
        acc[r][a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(ws[r], xs), acc[r][a]);
      }
    }
  }
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a) {
    const float* xm = x.m + (i0 + a) * ldm + g * 16;
    const __m256 xm0 = _mm256_loadu_ps(xm);
    const __m256 xm1 = _mm256_loadu_ps(xm + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][a] = _mm256_fnmadd_ps(scales[r].m[0], xm0, acc[r][a]);
      acc[r][a] = _mm256_fnmadd_ps(scales[r].m[1], xm1, acc[r][a]);
    }
  }
}

// Tile<R, N>::Run of GemvTiles for kType, on QuantActivations as they come.
template <DType kType>
struct TileOf {
  static const QuantActivations& Form(const QuantActivations& x, int64_t /*n*/) { return x; }

  template <int R, int N>
  struct Tile {
    static void Run(const GemvRows& rows, const QuantActivations& x, int64_t i0, float* out,
                    int64_t ldo) {
      __m256 acc[R][N];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int a = 0; a < N; ++a)
          acc[r][a] = _mm256_setzero_ps();
      }
      GemvGroups<kType, R> groups(rows);
      for (int64_t g = 0; g < groups.full(); ++g)
        AddGroup<kType, R, N>(groups.At(g), x, i0, g, kGroupChunks, acc);
      if (groups.tail_chunks() != 0)
        AddGroup<kType, R, N>(groups.Tail(), x, i0, groups.full(), groups.tail_chunks(), acc);
#pragma GCC unroll 8
      for (int a = 0; a < N; ++a) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          out[a * ldo + r] = Avx2ReduceAdd(acc[r][a]);
      }
    }
  };
};

}  // namespace

void Avx2QuantGemv(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  DirectGemv<TileOf, kTileRows>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
}

}  // namespace switchyard::runtime::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
