// The direct decode GEMV of GGML quantized weights (quant_gemv.h) on AVX-512 VNNI: each
// 64-byte unit of a group's q values (elements 64 p .. 64 p + 63) is unpacked from the
// weight bytes in registers (nibbles split by a per-lane variable shift, fifth and sixth
// bits merged under byte masks) and goes straight into vpdpbusd against the int8
// activations; each int32 lane (4 products, one sub-block) is scaled by its sub-block's
// weight scale and the activations' chunk scale, and the mins come off per group. Several
// weight rows share each activation load. Q4_0 and Q4_1 go four blocks at a time instead
// (AddQuadGroup), against activations reordered to match once per call. Compiled for its
// target by the pragma below and reached only through Avx512QuantKernels(), after
// CpuSupportsAvx512Vnni() said yes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/cpu/internal/quant_gemv.h"
#include "runtime/cpu/internal/scratch.h"

#if defined(__clang__)
#pragma clang attribute push(                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,fma,f16c"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace switchyard::runtime::cpu {
namespace {

// Weight rows per tile: each activation load serves this many rows.
constexpr int kTileRows = 4;

// Shifts each 16-bit lane of the 128-bit lanes (of 64-bit lanes where kWide) right by 0
// in even and 4 in odd ones: on a register holding the same bytes twice, the low nibbles
// then the high ones.
template <bool kWide>
inline __m512i SplitNibbles(__m512i twice) {
  const __m512i shift = kWide
                            ? _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004, 0x0004000400040004,
                                                0x0004000400040004, 0x0004000400040004)
                            : _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                                0x0004000400040004, 0x0004000400040004);
  return _mm512_and_si512(_mm512_srlv_epi16(twice, shift), _mm512_set1_epi8(0x0F));
}

// Unit p (elements 64 p .. 64 p + 63) of the q values of the group at `group`, as
// quant_decode.h's ChunkQ gives them chunk by chunk.
template <DType kType>
inline __m512i Unit(const uint8_t* group, int64_t p) {
  constexpr size_t kBlock = quant_decode::kBlockBytes<kType>;
  if constexpr (kType == DType::kQ4_0 || kType == DType::kQ4_1 || kType == DType::kQ5_0 ||
                kType == DType::kQ5_1) {
    // Blocks 2 p and 2 p + 1; the qs (16 bytes of nibbles) are the last bytes of a block.
    const uint8_t* b0 = group + static_cast<size_t>(2 * p) * kBlock;
    const uint8_t* b1 = b0 + kBlock;
    const __m256i qs0 = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + kBlock - 16)));
    const __m256i qs1 = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + kBlock - 16)));
    __m512i q = SplitNibbles<false>(_mm512_inserti64x4(_mm512_castsi256_si512(qs0), qs1, 1));
    if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
      // Bit t of a block's 4 qh bytes (just before its qs) is element t's fifth bit.
      const uint64_t bits = quant_gemv::Bits32(b0 + kBlock - 20) |
                            static_cast<uint64_t>(quant_gemv::Bits32(b1 + kBlock - 20)) << 32;
      q = _mm512_mask_add_epi8(q, _cvtu64_mask64(bits), q, _mm512_set1_epi8(16));
    }
    return q;
  } else {
    static_assert(kType == DType::kQ4_K || kType == DType::kQ5_K);
    constexpr bool kFive = kType == DType::kQ5_K;
    constexpr size_t kQs = kFive ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);
    // qs[32 p + l]: elements 64 p + l (low nibble) and 64 p + 32 + l (high).
    __m512i q = SplitNibbles<true>(_mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + kQs + 32 * p))));
    if constexpr (kFive) {
      // Bit c of qh[l] is element 32 c + l's fifth bit; here c = 2 p, 2 p + 1.
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + offsetof(BlockQ5_K, qh))));
      const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * p))),
                                             _mm256_set1_epi8(static_cast<char>(2 << (2 * p))), 1);
      q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bit), q, _mm512_set1_epi8(16));
    }
    return q;
  }
}

// The fp16 fields of a Q4_0 or Q4_1 group's eight blocks as f32: lanes 0-7 their d, lanes
// 8-15 their m (Q4_1) or 0 (Q4_0). Picked out of two 64-byte loads by one word permute
// (the fields fall within words 0-31 and 32-63 (Q4_0) or 40-71 (Q4_1) of the group) rather
// than read one by one.
template <DType kType>
inline __m512 QuadFields(const uint8_t* group) {
  static_assert(kType == DType::kQ4_0 || kType == DType::kQ4_1);
  constexpr bool kMin = kType == DType::kQ4_1;
  // Words per block, and the first word of the second load.
  constexpr int kWords = static_cast<int>(quant_decode::kBlockBytes<kType>) / 2;
  constexpr int kSecond = kMin ? 40 : 32;
  constexpr size_t kSecondByte = size_t{2} * kSecond;
  static_assert(kSecondByte + 64 <= kGroupBytes<kType>);
  static_assert(7 * kWords + (kMin ? 1 : 0) - kSecond < 32 && 4 * kWords >= kSecond);
  // Word 8 h + b of the result: block b's d (h = 0) or m (h = 1); index bit 5 picks the
  // second load.
  constexpr auto kAt = [](int b, int h) constexpr {
    const int word = b * kWords + h;
    return static_cast<int16_t>(word < 32 ? word : 32 + word - kSecond);
  };
  const __m512i index =
      _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, kAt(7, 1), kAt(6, 1),
                       kAt(5, 1), kAt(4, 1), kAt(3, 1), kAt(2, 1), kAt(1, 1), kAt(0, 1), kAt(7, 0),
                       kAt(6, 0), kAt(5, 0), kAt(4, 0), kAt(3, 0), kAt(2, 0), kAt(1, 0), kAt(0, 0));
  const __m512i fields =
      _mm512_maskz_permutex2var_epi16(kMin ? 0xFFFF : 0x00FF, _mm512_loadu_si512(group), index,
                                      _mm512_loadu_si512(group + kSecondByte));
  return _mm512_cvtph_ps(_mm512_castsi512_si256(fields));
}

// QuadFields of a row's short last group, read in place: its first `blocks` blocks (< 8),
// zero for the rest.
template <DType kType>
inline __m512 ShortQuadFields(const uint8_t* group, int64_t blocks) {
  alignas(64) float fields[16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = group + static_cast<size_t>(b) * quant_decode::kBlockBytes<kType>;
    fields[b] = quant_decode::Half(block);
    if constexpr (kType == DType::kQ4_1)
      fields[8 + b] = quant_decode::Half(block + offsetof(BlockQ4_1, m));
  }
  return _mm512_load_ps(fields);
}

// acc[r][a] += the dot of group g of weight row r (at group[r]) with activation row i0 + a,
// over the group's first `chunks` chunks (the rest are zero).
template <DType kType, int R, int N>
inline void AddGroup(const uint8_t* const* group, const QuantActivations& x, int64_t i0, int64_t g,
                     int64_t chunks, __m512 acc[R][N]) {
  const int64_t lds = x.ldq / 4;
  const int64_t ldm = x.ldq / 16;
  __m512 s[R];
  __m512 m[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const GroupScales scales = GroupScalesOf<kType>(group[r]);
    s[r] = _mm512_insertf32x8(_mm512_castps256_ps512(scales.s[0]), scales.s[1], 1);
    m[r] = _mm512_insertf32x8(_mm512_castps256_ps512(scales.m[0]), scales.m[1], 1);
  }
#pragma GCC unroll 8
  for (int64_t p = 0; p < 4; ++p) {
    if (2 * p >= chunks)
      break;
    // Lane l of unit p is sub-block 4 p + l / 4.
    const __m512i spread =
        _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(4 * p)),
                         _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    __m512i w[R];
    __m512 ws[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      w[r] = Unit<kType>(group[r], p);
      ws[r] = _mm512_permutexvar_ps(spread, s[r]);
    }
#pragma GCC unroll 8
    for (int a = 0; a < N; ++a) {
      const int64_t i = i0 + a;
      const __m512i xq = _mm512_loadu_si512(x.q + i * x.ldq + g * kGroupElems + 64 * p);
      const __m512 xs = _mm512_loadu_ps(x.s + i * lds + g * 64 + 16 * p);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[r], xq);
        acc[r][a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ws[r], xs), acc[r][a]);
      }
    }
  }
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a) {
    const __m512 xm = _mm512_loadu_ps(x.m + (i0 + a) * ldm + g * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[r][a] = _mm512_fnmadd_ps(m[r], xm, acc[r][a]);
  }
}

// Q4_0 and Q4_1 four blocks (128 elements, a "quad") at a time. A block's 16 qs bytes hold
// its elements t < 16 in the low nibbles and t + 16 in the high ones, so the qs of four
// blocks side by side give, by one mask and one shift, 64 values of elements t < 16 and 64
// of t >= 16, with no byte moved across lanes: the activations are reordered to match
// instead, once per call (QuadOrder). Every int32 lane of both halves lies in one block
// (lanes 4 b .. 4 b + 3: block b of the quad), so their dot products add in int32 and are
// scaled once by the block's d; a group's mins come off in one multiply-add of its fields
// (QuadFields) by its chunks' activation sums.
constexpr bool IsQuadType(DType dtype) {
  return dtype == DType::kQ4_0 || dtype == DType::kQ4_1;
}

// Activations in quad order for kType, per row of ldq elements: q holds, per quad u, the
// bytes of its four chunks' elements t < 16 (64 bytes) then those of t >= 16 (64); s per
// quad 16 lanes, lane l the scale of chunk l / 4 (ldq / 8 floats a row); sums per group 16
// lanes to multiply QuadFields by: for Q4_1 lane 8 + c the activation sum of chunk c (its
// scale times the sum of its int8 values), for Q4_0 lane c -8 times that (a Q4_0 value is
// d (q - 8)); the other lanes 0 (ldq / 16 floats a row).
struct QuadActivations {
  const int8_t* q;
  const float* s;
  const float* sums;
  int64_t ldq;
};

// x's first n rows in quad order for kType, in this thread's scratch (valid until its
// next call).
template <DType kType>
QuadActivations QuadOrder(const QuantActivations& x, int64_t n) {
  thread_local std::vector<int8_t> q_storage;
  thread_local std::vector<float> s_storage;
  thread_local std::vector<float> sums_storage;
  int8_t* q = Grow(q_storage, static_cast<size_t>(n * x.ldq));
  float* s = Grow(s_storage, static_cast<size_t>(n * x.ldq / 8));
  float* sums = Grow(sums_storage, static_cast<size_t>(n * x.ldq / 16));
  // Lane l: the first of chunk l / 4's eight lane scales in QuantActivations' s.
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24);
  // Lane c (of 8): QuantActivations' m lanes 2 c and 2 c + 1 (chunk c's halves).
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t i = 0; i < n; ++i) {
    const int8_t* from = x.q + i * x.ldq;
    const float* from_s = x.s + i * x.ldq / 4;
    const float* from_m = x.m + i * x.ldq / 16;
    int8_t* to = q + i * x.ldq;
    float* to_s = s + i * x.ldq / 8;
    float* to_sums = sums + i * x.ldq / 16;
    for (int64_t u = 0; u < x.ldq / 128; ++u) {
      // 128-bit lanes: chunk c's halves are lanes 2 c % 4 and 2 c % 4 + 1 of a or b.
      const __m512i a = _mm512_loadu_si512(from + 128 * u);
      const __m512i b = _mm512_loadu_si512(from + 128 * u + 64);
      _mm512_storeu_si512(to + 128 * u, _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_storeu_si512(to + 128 * u + 64, _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
      _mm512_storeu_ps(to_s + 16 * u,
                       _mm512_permutex2var_ps(_mm512_loadu_ps(from_s + 32 * u), spread,
                                              _mm512_loadu_ps(from_s + 32 * u + 16)));
    }
    for (int64_t g = 0; g < x.ldq / kGroupElems; ++g) {
      const __m512 halves = _mm512_loadu_ps(from_m + 16 * g);
      const __m512 chunk =
          _mm512_add_ps(_mm512_permutexvar_ps(even, halves), _mm512_permutexvar_ps(odd, halves));
      const __m256 low = _mm512_castps512_ps256(chunk);
      _mm512_storeu_ps(to_sums + 16 * g,
                       kType == DType::kQ4_1
                           ? _mm512_insertf32x8(_mm512_setzero_ps(), low, 1)
                           : _mm512_zextps256_ps512(_mm256_mul_ps(low, _mm256_set1_ps(-8.0f))));
    }
  }
  return {q, s, sums, x.ldq};
}

// The qs of blocks 4 u .. 4 u + 3 of the group at `group`, side by side; where kShort,
// only its first `blocks` blocks are read, and the others' qs are zero.
template <DType kType, bool kShort>
inline __m512i QuadQs(const uint8_t* group, int64_t u, int64_t blocks) {
  constexpr size_t kBlock = quant_decode::kBlockBytes<kType>;
  // The qs are a block's last 16 bytes.
  const uint8_t* qs = group + static_cast<size_t>(4 * u) * kBlock + kBlock - 16;
  const auto load = [&](int b) {
    if (kShort && 4 * u + b >= blocks)
      return _mm_setzero_si128();
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + b * kBlock));
  };
  const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(load(0)), load(1), 1);
  const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(load(2)), load(3), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// AddGroup for Q4_0 and Q4_1, on activations in quad order; kShort for a row's short last
// group, which it reads in place (Q4_0 and Q4_1 rows need no padded copy).
template <DType kType, bool kShort, int R, int N>
inline void AddQuadGroup(const uint8_t* const* group, const QuadActivations& x, int64_t i0,
                         int64_t g, int64_t chunks, __m512 acc[R][N]) {
  const int64_t lds = x.ldq / 8;
  const int64_t ldm = x.ldq / 16;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  __m512 fields[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    fields[r] = kShort ? ShortQuadFields<kType>(group[r], chunks) : QuadFields<kType>(group[r]);
#pragma GCC unroll 2
  for (int64_t u = 0; u < 2; ++u) {
    if (4 * u >= chunks)
      break;
    // Lane l of quad u is block 4 u + l / 4, whose d is lane 4 u + l / 4 of the fields.
    const __m512i spread =
        _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(4 * u)),
                         _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    __m512i lo[R];
    __m512i hi[R];
    __m512 ws[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i qs = QuadQs<kType, kShort>(group[r], u, chunks);
      lo[r] = _mm512_and_si512(qs, low_nibbles);
      hi[r] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), low_nibbles);
      ws[r] = _mm512_permutexvar_ps(spread, fields[r]);
    }
#pragma GCC unroll 8
    for (int a = 0; a < N; ++a) {
      const int8_t* xq = x.q + (i0 + a) * x.ldq + g * kGroupElems + 128 * u;
      const __m512i x_lo = _mm512_loadu_si512(xq);
      const __m512i x_hi = _mm512_loadu_si512(xq + 64);
      const __m512 xs = _mm512_loadu_ps(x.s + (i0 + a) * lds + g * 32 + 16 * u);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[r], x_lo), hi[r], x_hi);
        acc[r][a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ws[r], xs), acc[r][a]);
      }
    }
  }
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a) {
    const __m512 sums = _mm512_loadu_ps(x.sums + (i0 + a) * ldm + g * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[r][a] = _mm512_fmadd_ps(fields[r], sums, acc[r][a]);
  }
}

// Tile<R, N>::Run of GemvTiles for kType, on QuadActivations where IsQuadType(kType).
template <DType kType>
struct TileOf {
  using Activations = std::conditional_t<IsQuadType(kType), QuadActivations, QuantActivations>;

  static Activations Form(const QuantActivations& x, int64_t n) {
    if constexpr (IsQuadType(kType))
      return QuadOrder<kType>(x, n);
    else
      return x;
  }

  template <int R, int N>
  struct Tile {
    static void Run(const GemvRows& rows, const Activations& x, int64_t i0, float* out,
                    int64_t ldo) {
      __m512 acc[R][N];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int a = 0; a < N; ++a)
          acc[r][a] = _mm512_setzero_ps();
      }
      GemvGroups<kType, R> groups(rows);
      if constexpr (IsQuadType(kType)) {
        for (int64_t g = 0; g < groups.full(); ++g)
          AddQuadGroup<kType, false, R, N>(groups.At(g), x, i0, g, kGroupChunks, acc);
        if (groups.tail_chunks() != 0) {
          AddQuadGroup<kType, true, R, N>(groups.At(groups.full()), x, i0, groups.full(),
                                          groups.tail_chunks(), acc);
        }
      } else {
        for (int64_t g = 0; g < groups.full(); ++g)
          AddGroup<kType, R, N>(groups.At(g), x, i0, g, kGroupChunks, acc);
        if (groups.tail_chunks() != 0)
          AddGroup<kType, R, N>(groups.Tail(), x, i0, groups.full(), groups.tail_chunks(), acc);
      }
#pragma GCC unroll 8
      for (int a = 0; a < N; ++a) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          out[a * ldo + r] = _mm512_reduce_add_ps(acc[r][a]);
      }
    }
  };
};

}  // namespace

void Avx512QuantGemv(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k,
                     const uint8_t* w, size_t w_row_bytes, int64_t m_begin, int64_t m_end,
                     float* out, int64_t ldo) {
  DirectGemv<TileOf, kTileRows>(w_dtype, x, n, k, w, w_row_bytes, m_begin, m_end, out, ldo);
}

}  // namespace switchyard::runtime::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
