// Decoding of GGML's block-quantized weight rows (runtime/ggml_blocks.h) into one common
// form that the int8 kernels of every ISA multiply (isa_avx2_quant.cc,
// isa_avx512_quant.cc): for a group of up to eight 32-element chunks of a row,
//
//   element 32 c + t = ws[8 c + lane(t)] * q[32 c + t] - wm[2 c + t / 16]
//
// with q unsigned bytes below 64 and lane(t) = t / 4 (the int32 lane that a 4-byte dot
// product of the chunk's bytes lands in; lanes 0-3 cover the chunk's first 16 elements,
// 4-7 its last 16). So one scale per 16 elements (Q6_K's sub-blocks) fits as well as one
// per 32, and a kernel multiplies q by int8 activations, scales each int32 lane, and
// takes the mins off with the activations' 16-element sums. A group is a K type's
// super-block, or eight consecutive Q4/Q5 blocks; chunks past `chunks` are zero.
//
// Compiled for AVX2 by their own attributes (the AVX-512 kernels run on CPUs that have
// it); call them only from code that already runs on it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/float16.h"
#include "runtime/ggml_blocks.h"

#define SY_QUANT_DECODE __attribute__((target("avx2,fma,f16c"), always_inline))

namespace switchyard::runtime::cpu {

inline constexpr int64_t kGroupChunks = 8;
inline constexpr int64_t kChunkElems = 32;
inline constexpr int64_t kGroupElems = kGroupChunks * kChunkElems;

struct DecodedGroup {
  alignas(64) uint8_t q[kGroupElems];
  alignas(64) float ws[kGroupChunks * 8];
  alignas(64) float wm[kGroupChunks * 2];
};

namespace quant_decode {

SY_QUANT_DECODE inline float Half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _cvtsh_ss(bits);
}

// Chunk c's 8 lane scales: `lo` for lanes 0-3, `hi` for lanes 4-7; its mins likewise.
SY_QUANT_DECODE inline void SetScales(DecodedGroup* g, int64_t c, float lo, float hi, float m_lo,
                                      float m_hi) {
  _mm256_store_ps(g->ws + 8 * c, _mm256_setr_m128(_mm_set1_ps(lo), _mm_set1_ps(hi)));
  g->wm[2 * c] = m_lo;
  g->wm[2 * c + 1] = m_hi;
}

SY_QUANT_DECODE inline void ZeroTail(DecodedGroup* g, int64_t chunks) {
  for (int64_t c = chunks; c < kGroupChunks; ++c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(g->q + 32 * c), _mm256_setzero_si256());
    SetScales(g, c, 0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// 16 bytes of nibbles as 32 bytes: the low nibbles, then the high ones.
SY_QUANT_DECODE inline __m256i SplitNibbles(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_setr_m128i(_mm_and_si128(v, mask), _mm_and_si128(_mm_srli_epi16(v, 4), mask));
}

// 0x10 in byte j where bit j of the little-endian 32-bit `bits` is set.
SY_QUANT_DECODE inline __m256i BitsToBytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

template <DType kType>
inline constexpr size_t kBlockBytes = kType == DType::kQ4_0   ? sizeof(BlockQ4_0)
                                      : kType == DType::kQ4_1 ? sizeof(BlockQ4_1)
                                      : kType == DType::kQ5_0 ? sizeof(BlockQ5_0)
                                      : kType == DType::kQ5_1 ? sizeof(BlockQ5_1)
                                      : kType == DType::kQ4_K ? sizeof(BlockQ4_K)
                                      : kType == DType::kQ5_K ? sizeof(BlockQ5_K)
                                                              : sizeof(BlockQ6_K);

// Chunk c's 32 q values (element order) of the group that starts at `group`: for Q4_0 ...
// Q5_1 the group's blocks from there (block c must be in the row), for Q4_K, Q5_K and
// Q6_K the super-block there. Q6_K's chunk 4 n + j (n: which 128-element half) holds
// bits from ql[64 n + (j & 1) * 32 + l] (low nibble for j < 2, high for j >= 2) and bits
// 2 j, 2 j + 1 of qh[32 n + l].
template <DType kType>
SY_QUANT_DECODE inline __m256i ChunkQ(const uint8_t* group, int64_t c) {
  const __m256i mask4 = _mm256_set1_epi8(0x0F);
  if constexpr (kType == DType::kQ4_0 || kType == DType::kQ4_1) {
    constexpr size_t kQs =
        kType == DType::kQ4_0 ? offsetof(BlockQ4_0, qs) : offsetof(BlockQ4_1, qs);
    return SplitNibbles(group + static_cast<size_t>(c) * kBlockBytes<kType> + kQs);
  } else if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    constexpr size_t kQh =
        kType == DType::kQ5_0 ? offsetof(BlockQ5_0, qh) : offsetof(BlockQ5_1, qh);
    const uint8_t* block = group + static_cast<size_t>(c) * kBlockBytes<kType>;
    uint32_t qh;
    std::memcpy(&qh, block + kQh, sizeof(qh));
    return _mm256_or_si256(SplitNibbles(block + kQh + 4), BitsToBytes(qh));
  } else if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    constexpr bool kFive = kType == DType::kQ5_K;
    constexpr size_t kQs = kFive ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);
    // qs[32 i + l] holds element 64 i + l (low nibble) and 64 i + 32 + l (high).
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + kQs + 32 * (c / 2)));
    __m256i q = _mm256_and_si256(c % 2 == 0 ? v : _mm256_srli_epi16(v, 4), mask4);
    if constexpr (kFive) {
      // Bit c of qh[l] is element 32 c + l's fifth bit.
      const __m256i qh =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + offsetof(BlockQ5_K, qh)));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << c));
      q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit),
                                              _mm256_set1_epi8(16)));
    }
    return q;
  } else {
    static_assert(kType == DType::kQ6_K);
    const int64_t n = c / 4, j = c % 4;
    const __m256i l = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(group + offsetof(BlockQ6_K, ql) + 64 * n + 32 * (j & 1)));
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(group + offsetof(BlockQ6_K, qh) + 32 * n));
    // Bits 2 j, 2 j + 1 of h to bits 4, 5.
    const __m256i high = j == 0   ? _mm256_slli_epi16(h, 4)
                         : j == 1 ? _mm256_slli_epi16(h, 2)
                         : j == 2 ? h
                                  : _mm256_srli_epi16(h, 2);
    return _mm256_or_si256(_mm256_and_si256(j < 2 ? l : _mm256_srli_epi16(l, 4), mask4),
                           _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
  }
}

// Q4_0, Q4_1, Q5_0, Q5_1: `chunks` blocks from block b0 of the row.
template <DType kType>
SY_QUANT_DECODE inline void DecodeSmallBlocks(const uint8_t* row, int64_t b0, int64_t chunks,
                                              DecodedGroup* g) {
  const uint8_t* group = row + static_cast<size_t>(b0) * kBlockBytes<kType>;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint8_t* block = group + static_cast<size_t>(c) * kBlockBytes<kType>;
    const float d = Half(block);
    float m;
    if constexpr (kType == DType::kQ4_0)
      m = 8.0f * d;
    else if constexpr (kType == DType::kQ5_0)
      m = 16.0f * d;
    else
      m = -Half(block + offsetof(BlockQ4_1, m));
    _mm256_store_si256(reinterpret_cast<__m256i*>(g->q + 32 * c), ChunkQ<kType>(group, c));
    SetScales(g, c, d, d, m, m);
  }
  ZeroTail(g, chunks);
}

// Q4_K and Q5_K: super-block sb of the row.
template <DType kType>
SY_QUANT_DECODE inline void DecodeK45(const uint8_t* row, int64_t sb, DecodedGroup* g) {
  const uint8_t* block = row + static_cast<size_t>(sb) * kBlockBytes<kType>;
  const float d = Half(block);
  const float dmin = Half(block + 2);
  for (int64_t c = 0; c < kGroupChunks; ++c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(g->q + 32 * c), ChunkQ<kType>(block, c));
    uint8_t sc, m;
    GetScaleMinK4(c, block + offsetof(BlockQ4_K, scales), &sc, &m);
    const float s = d * sc, mm = dmin * m;
    SetScales(g, c, s, s, mm, mm);
  }
}

// Q6_K: super-block sb of the row.
SY_QUANT_DECODE inline void DecodeQ6K(const uint8_t* row, int64_t sb, DecodedGroup* g) {
  const uint8_t* block = row + static_cast<size_t>(sb) * sizeof(BlockQ6_K);
  const float d = Half(block + offsetof(BlockQ6_K, d));
  const auto* scales = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6_K, scales));
  for (int64_t c = 0; c < kGroupChunks; ++c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(g->q + 32 * c), ChunkQ<DType::kQ6_K>(block, c));
    const float lo = d * scales[2 * c];
    const float hi = d * scales[2 * c + 1];
    SetScales(g, c, lo, hi, 32.0f * lo, 32.0f * hi);
  }
}

// Q2_K and Q3_K: super-block sb of the row. Chunk 4 n + j holds bits 2 j, 2 j + 1 of
// qs[32 n + l] (and for Q3_K, bit 4 n + j of hmask[l] as the third bit, offset by 4).
template <DType kType>
SY_QUANT_DECODE inline void DecodeK23(const uint8_t* row, int64_t sb, DecodedGroup* g) {
  constexpr bool kThree = kType == DType::kQ3_K;
  constexpr size_t kBytes = kThree ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  constexpr size_t kQs = kThree ? offsetof(BlockQ3_K, qs) : offsetof(BlockQ2_K, qs);
  const uint8_t* block = row + static_cast<size_t>(sb) * kBytes;
  const __m256i three = _mm256_set1_epi8(3);
  __m256i hmask = _mm256_setzero_si256();
  if constexpr (kThree)
    hmask =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + offsetof(BlockQ3_K, hmask)));
  for (int64_t n = 0; n < 2; ++n) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQs + 32 * n));
    for (int j = 0; j < 4; ++j) {
      const int64_t c = 4 * n + j;
      __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), three);
      if constexpr (kThree) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << c));
        q = _mm256_or_si256(q,
                            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit),
                                             _mm256_set1_epi8(4)));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(g->q + 32 * c), q);
    }
  }
  if constexpr (kThree) {
    const float d = Half(block + offsetof(BlockQ3_K, d));
    for (int64_t c = 0; c < kGroupChunks; ++c) {
      const float lo =
          d * static_cast<float>(Q3KScale(block + offsetof(BlockQ3_K, scales), 2 * c) - 32);
      const float hi =
          d * static_cast<float>(Q3KScale(block + offsetof(BlockQ3_K, scales), 2 * c + 1) - 32);
      SetScales(g, c, lo, hi, 4.0f * lo, 4.0f * hi);
    }
  } else {
    const float d = Half(block + offsetof(BlockQ2_K, d));
    const float dmin = Half(block + offsetof(BlockQ2_K, dmin));
    for (int64_t c = 0; c < kGroupChunks; ++c) {
      const uint8_t s0 = block[2 * c], s1 = block[2 * c + 1];
      SetScales(g, c, d * static_cast<float>(s0 & 0xF), d * static_cast<float>(s1 & 0xF),
                dmin * static_cast<float>(s0 >> 4), dmin * static_cast<float>(s1 >> 4));
    }
  }
}

}  // namespace quant_decode

// Decodes group `group` (chunks [8 group, 8 group + chunks)) of a row of `dtype`.
// REQUIRES: IsGgmlQuantDType(dtype); chunks == 8 for the K types.
SY_QUANT_DECODE inline void DecodeGroup(DType dtype, const uint8_t* row, int64_t group,
                                        int64_t chunks, DecodedGroup* g) {
  using quant_decode::DecodeK23;
  using quant_decode::DecodeK45;
  using quant_decode::DecodeQ6K;
  using quant_decode::DecodeSmallBlocks;
  switch (dtype) {
    case DType::kQ4_0:
      return DecodeSmallBlocks<DType::kQ4_0>(row, group * kGroupChunks, chunks, g);
    case DType::kQ4_1:
      return DecodeSmallBlocks<DType::kQ4_1>(row, group * kGroupChunks, chunks, g);
    case DType::kQ5_0:
      return DecodeSmallBlocks<DType::kQ5_0>(row, group * kGroupChunks, chunks, g);
    case DType::kQ5_1:
      return DecodeSmallBlocks<DType::kQ5_1>(row, group * kGroupChunks, chunks, g);
    case DType::kQ4_K:
      return DecodeK45<DType::kQ4_K>(row, group, g);
    case DType::kQ5_K:
      return DecodeK45<DType::kQ5_K>(row, group, g);
    case DType::kQ6_K:
      return DecodeQ6K(row, group, g);
    case DType::kQ2_K:
      return DecodeK23<DType::kQ2_K>(row, group, g);
    case DType::kQ3_K:
      return DecodeK23<DType::kQ3_K>(row, group, g);
    default:
      return;
  }
}

// The GEMV shape over decoded rows, shared by the ISAs: each weight row j in [m_begin,
// m_end) is decoded once into a per-thread copy (a few KiB, in L1/L2) while the next row
// is prefetched, then Dot<R>::Run(row, chunks, x, i, out + i * ldo + j, ldo) (the ISA's dot
// of R <= 4 activation rows from row i against the decoded row) runs until all n are done.
template <template <int> class Dot, typename Activations>
SY_QUANT_DECODE inline void DotRowsDecoded(DType w_dtype, const Activations& x, int64_t n,
                                           int64_t k, const uint8_t* w, size_t w_row_bytes,
                                           int64_t m_begin, int64_t m_end, float* out,
                                           int64_t ldo) {
  const int64_t chunks = k / kChunkElems;
  const int64_t groups = (chunks + kGroupChunks - 1) / kGroupChunks;
  thread_local std::vector<DecodedGroup> row_storage;
  if (static_cast<int64_t>(row_storage.size()) < groups)
    row_storage.resize(static_cast<size_t>(groups));
  DecodedGroup* row = row_storage.data();
  for (int64_t j = m_begin; j < m_end; ++j) {
    const uint8_t* wr = w + static_cast<size_t>(j) * w_row_bytes;
    if (j + 1 < m_end) {
      for (size_t off = 0; off < w_row_bytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(wr + w_row_bytes + off), _MM_HINT_T0);
    }
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t in_group = chunks - g * kGroupChunks;
      DecodeGroup(w_dtype, wr, g, in_group < kGroupChunks ? in_group : kGroupChunks, &row[g]);
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      Dot<4>::Run(row, chunks, x, i, out + i * ldo + j, ldo);
    switch (n - i) {
      case 3:
        Dot<3>::Run(row, chunks, x, i, out + i * ldo + j, ldo);
        break;
      case 2:
        Dot<2>::Run(row, chunks, x, i, out + i * ldo + j, ldo);
        break;
      case 1:
        Dot<1>::Run(row, chunks, x, i, out + i * ldo + j, ldo);
        break;
      default:
        break;
    }
  }
}

}  // namespace switchyard::runtime::cpu
