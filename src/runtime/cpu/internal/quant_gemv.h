// The direct decode GEMV of GGML's quantized weights (isa_avx2_quant_gemv.cc,
// isa_avx512_quant_gemv.cc): the parts that do not depend on the vector width.
//
// It computes what DotRowsDecoded (quant_decode.h) does over the same decoded form
//
//   element 32 c + t = ws(c, t / 16) * q[32 c + t] - wm(c, t / 16)
//
// but each kernel unpacks a group's bytes straight from the weight row into registers and
// multiplies them there, with no decoded copy in L1: in element order, a group's 16 scales
// and 16 mins (one per 16 elements) coming from GroupScalesOf below in two 8-float halves
// that the ISA spreads over its int32 lanes; or in an order of the ISA's own, against
// activations it reorders to match (TileOf<kType>::Form; AVX-512's Q4_0 and Q4_1).
//
// Compiled for AVX2 by their own attributes (the AVX-512 kernels run on CPUs that have
// it); call them only from code that already runs on it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/cpu/internal/quant_decode.h"
#include "runtime/dtype.h"
#include "runtime/ggml_blocks.h"

namespace switchyard::runtime::cpu {

// The types with a direct GEMV: Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K. Q2_K, Q3_K and Q6_K
// keep the decoded path: a direct Q6_K GEMV (unpacking its 4 + 2 bit halves in registers)
// was 2.6x faster with its weights in cache but 0.8-0.9x with them streamed from memory,
// where decode reads them, and 0.94x in a whole decode step.
inline bool HasDirectGemv(DType dtype) {
  switch (dtype) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return true;
    default:
      return false;
  }
}

// Bytes of one group (256 elements) of a row of kType: eight blocks or one super-block.
template <DType kType>
inline constexpr size_t kGroupBytes = quant_decode::kBlockBytes<kType>*(
    kType == DType::kQ4_K || kType == DType::kQ5_K ? 1 : kGroupChunks);

// A group's scales and mins, one per 16 elements: s[h / 8] lane h % 8 for sub-block h.
struct GroupScales {
  __m256 s[2];
  __m256 m[2];
};

namespace quant_gemv {

SY_QUANT_DECODE inline uint32_t Bits32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

SY_QUANT_DECODE inline int16_t Bits16(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The fp16 values at p + i * stride for i < 8, as f32 (element loads: a gather is slower
// on some CPUs, e.g. AMD Zen 4).
SY_QUANT_DECODE inline __m256 EightHalves(const uint8_t* p, size_t stride) {
  return _mm256_cvtph_ps(_mm_setr_epi16(Bits16(p), Bits16(p + stride), Bits16(p + 2 * stride),
                                        Bits16(p + 3 * stride), Bits16(p + 4 * stride),
                                        Bits16(p + 5 * stride), Bits16(p + 6 * stride),
                                        Bits16(p + 7 * stride)));
}

// Eight per-chunk values as the two halves of 16 per-sub-block ones.
SY_QUANT_DECODE inline void SpreadChunks(__m256 per_chunk, __m256 out[2]) {
  out[0] = _mm256_permutevar8x32_ps(per_chunk, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
  out[1] = _mm256_permutevar8x32_ps(per_chunk, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
}

// Eight unsigned bytes (little-endian in v) as f32 times `scale`.
SY_QUANT_DECODE inline __m256 ScaledBytes(uint64_t v, float scale) {
  const __m256i wide = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(v)));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(wide), _mm256_set1_ps(scale));
}

}  // namespace quant_gemv

// The scales and mins of a group of a 32-element type from its blocks' fp16 fields, f32
// here: d (every type) and m (Q4_1, Q5_1; ignored for the others).
template <DType kType>
SY_QUANT_DECODE inline GroupScales SmallBlockScales(__m256 d, __m256 m) {
  GroupScales out{};
  quant_gemv::SpreadChunks(d, out.s);
  if constexpr (kType == DType::kQ4_0 || kType == DType::kQ5_0) {
    quant_gemv::SpreadChunks(_mm256_mul_ps(d, _mm256_set1_ps(kType == DType::kQ4_0 ? 8.0f : 16.0f)),
                             out.m);
  } else {
    // The stored min is added; the decoded form subtracts.
    quant_gemv::SpreadChunks(_mm256_xor_ps(m, _mm256_set1_ps(-0.0f)), out.m);
  }
  return out;
}

// The scales and mins of the group at `group` (a whole group: eight blocks for the 32-element
// types, a super-block for the K types), as quant_decode.h computes them.
template <DType kType>
SY_QUANT_DECODE inline GroupScales GroupScalesOf(const uint8_t* group) {
  using quant_gemv::Bits32;
  using quant_gemv::EightHalves;
  using quant_gemv::ScaledBytes;
  using quant_gemv::SpreadChunks;
  GroupScales out{};
  if constexpr (kType == DType::kQ4_0 || kType == DType::kQ5_0) {
    return SmallBlockScales<kType>(EightHalves(group, quant_decode::kBlockBytes<kType>),
                                   _mm256_setzero_ps());
  } else if constexpr (kType == DType::kQ4_1 || kType == DType::kQ5_1) {
    constexpr size_t kBytes = quant_decode::kBlockBytes<kType>;
    return SmallBlockScales<kType>(EightHalves(group, kBytes), EightHalves(group + 2, kBytes));
  } else {
    static_assert(kType == DType::kQ4_K || kType == DType::kQ5_K);
    // GetScaleMinK4 for all eight sub-blocks at once: bytes 0-3 of the 12 hold scales 0-3
    // (low 6 bits) and the top bits of scales 4-7, bytes 4-7 the same for the mins, bytes
    // 8-11 the low nibbles of scales 4-7 and (high nibbles) of mins 4-7.
    const uint8_t* packed = group + offsetof(BlockQ4_K, scales);
    const uint32_t a = Bits32(packed), b = Bits32(packed + 4), c = Bits32(packed + 8);
    const uint32_t sc_lo = a & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
    const uint32_t mn_lo = b & 0x3F3F3F3Fu;
    const uint32_t mn_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
    const float d = quant_decode::Half(group);
    const float dmin = quant_decode::Half(group + 2);
    SpreadChunks(ScaledBytes(sc_lo | static_cast<uint64_t>(sc_hi) << 32, d), out.s);
    SpreadChunks(ScaledBytes(mn_lo | static_cast<uint64_t>(mn_hi) << 32, dmin), out.m);
  }
  return out;
}

// R consecutive weight rows (row r at first + r * row_bytes) of k elements, and where the
// rows after them start, for prefetching (null where they are not this call's).
struct GemvRows {
  const uint8_t* first;
  size_t row_bytes;
  int64_t k;
  const uint8_t* next;
};

// The groups of R weight rows: At(g)[r] is where row r's group g starts (g <= full();
// where a 32-element type's row ends in a short group, tail_chunks() > 0, At(full()) is
// where it starts, for a kernel that reads no further than the row's end), and Tail()[r]
// is a copy of row r's short group padded with zero blocks (whose scales are zero). Construction
// prefetches the next R rows whole: group by group, just ahead of their use, was slower (BM_Gemv,
// weights cold, 2 threads).
template <DType kType, int R>
class GemvGroups {
 public:
  SY_QUANT_DECODE explicit GemvGroups(const GemvRows& rows)
      : rows_(rows),
        full_(rows.k / kGroupElems),
        tail_chunks_(rows.k / kChunkElems % kGroupChunks) {
    if (rows.next != nullptr) {
      for (size_t off = 0; off < R * rows.row_bytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(rows.next + off), _MM_HINT_T0);
    }
  }

  SY_QUANT_DECODE int64_t full() const { return full_; }
  SY_QUANT_DECODE int64_t tail_chunks() const { return tail_chunks_; }

  SY_QUANT_DECODE const uint8_t* const* At(int64_t g) {
    const size_t at = static_cast<size_t>(g) * kBytes;
    for (int r = 0; r < R; ++r)
      group_[r] = rows_.first + r * rows_.row_bytes + at;
    return group_;
  }

  // REQUIRES: tail_chunks() > 0; called once.
  SY_QUANT_DECODE const uint8_t* const* Tail() {
    const size_t at = static_cast<size_t>(full_) * kBytes;
    for (int r = 0; r < R; ++r) {
      std::memcpy(padded_[r], rows_.first + r * rows_.row_bytes + at,
                  static_cast<size_t>(tail_chunks_) * quant_decode::kBlockBytes<kType>);
      group_[r] = padded_[r];
    }
    return group_;
  }

 private:
  static constexpr size_t kBytes = kGroupBytes<kType>;
  // Zero past the blocks Tail copies.
  alignas(64) uint8_t padded_[R][kBytes] = {};
  GemvRows rows_;
  int64_t full_;
  int64_t tail_chunks_;
  const uint8_t* group_[R] = {};
};

// The GEMV's loop over weight rows and activation rows, shared by the ISAs: weight rows
// [m_begin, m_end) go in tiles of kRows (single rows at the end), and each tile against the
// activation rows up to four at a time: Tile<R, N>::Run(rows, x, i, out + i * ldo + j, ldo)
// (the ISA's dot of activation rows i .. i + N against the R weight rows from j) writes
// out[a * ldo + r] for a < N, r < R. A row's arithmetic does not depend on R or N, so its
// result is the same however the rows are split across threads.
// X is the activations' form the tiles read (QuantActivations, or an ISA's reordering of it).
template <template <int, int> class Tile, int kRows, class X>
SY_QUANT_DECODE inline void GemvTiles(const X& x, int64_t n, int64_t k, const uint8_t* w,
                                      size_t w_row_bytes, int64_t m_begin, int64_t m_end,
                                      float* out, int64_t ldo) {
  int64_t j = m_begin;
  const auto run = [&]<int R>() {
    const uint8_t* first = w + static_cast<size_t>(j) * w_row_bytes;
    const GemvRows rows{first, w_row_bytes, k, j + R < m_end ? first + R * w_row_bytes : nullptr};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      Tile<R, 4>::Run(rows, x, i, out + i * ldo + j, ldo);
    switch (n - i) {
      case 3:
        return Tile<R, 3>::Run(rows, x, i, out + i * ldo + j, ldo);
      case 2:
        return Tile<R, 2>::Run(rows, x, i, out + i * ldo + j, ldo);
      case 1:
        return Tile<R, 1>::Run(rows, x, i, out + i * ldo + j, ldo);
      default:
        return;
    }
  };
  for (; j + kRows <= m_end; j += kRows)
    run.template operator()<kRows>();
  for (; j < m_end; ++j)
    run.template operator()<1>();
}

// The GEMV for any type with HasDirectGemv, on the ISA's TileOf<kType>::Tile, which reads
// the activations in the form TileOf<kType>::Form(x, n) gives.
template <template <DType> class TileOf, int kRows>
SY_QUANT_DECODE inline void DirectGemv(DType w_dtype, const QuantActivations& x, int64_t n,
                                       int64_t k, const uint8_t* w, size_t w_row_bytes,
                                       int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  switch (w_dtype) {
    case DType::kQ4_0:
      return GemvTiles<TileOf<DType::kQ4_0>::template Tile, kRows>(
          TileOf<DType::kQ4_0>::Form(x, n), n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kQ4_1:
      return GemvTiles<TileOf<DType::kQ4_1>::template Tile, kRows>(
          TileOf<DType::kQ4_1>::Form(x, n), n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kQ5_0:
      return GemvTiles<TileOf<DType::kQ5_0>::template Tile, kRows>(
          TileOf<DType::kQ5_0>::Form(x, n), n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kQ5_1:
      return GemvTiles<TileOf<DType::kQ5_1>::template Tile, kRows>(
          TileOf<DType::kQ5_1>::Form(x, n), n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kQ4_K:
      return GemvTiles<TileOf<DType::kQ4_K>::template Tile, kRows>(
          TileOf<DType::kQ4_K>::Form(x, n), n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    case DType::kQ5_K:
      return GemvTiles<TileOf<DType::kQ5_K>::template Tile, kRows>(
          TileOf<DType::kQ5_K>::Form(x, n), n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
    default:
      return;
  }
}

}  // namespace switchyard::runtime::cpu
