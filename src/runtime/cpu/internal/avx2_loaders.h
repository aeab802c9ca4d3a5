// 8-lane f32 loads of F32, BF16 and F16 rows for the AVX2 kernels (isa_avx2*.cc), and the
// lane reductions, Q8_0 block scale and prefetch distance they share:
// Load(row, t) reads elements [t, t + 8) of the row at `row`; the partial form reads only
// the first `left` of them (all 8 when left >= 8) and zeroes the other lanes, so row tails
// need no scalar code of their own. Compiled for AVX2/F16C by their own attributes; call
// them only from code that already runs on it.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define SY_AVX2_LOADER __attribute__((target("avx2,fma,f16c"), always_inline))

namespace switchyard::runtime::cpu {

// Weight rows ahead of the one being read that the streaming dot products (decode's GEMV)
// prefetch: the hardware prefetchers alone kept one core ~20% below the bandwidth it
// reached with them, for BF16 and Q8_0 rows of 576 to 2048 elements.
inline constexpr int64_t kAvx2PrefetchRows = 6;

// Lanes [0, left) of an 8-lane vector as an all-ones mask (for maskload / maskstore).
SY_AVX2_LOADER inline __m256i Avx2TailMask(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

struct Avx2LoadF32 {
  SY_AVX2_LOADER static __m256 Load(const uint8_t* row, int64_t t) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + t);
  }
  SY_AVX2_LOADER static __m256 Load(const uint8_t* row, int64_t t, int64_t left) {
    if (left >= 8)
      return Load(row, t);
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + t, Avx2TailMask(left));
  }
};

// The 8 16-bit values at element t, the partial form through a zeroed copy.
SY_AVX2_LOADER inline __m128i Load16Bit(const uint8_t* row, int64_t t, int64_t left) {
  if (left >= 8)
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * t));
  uint16_t tail[8] = {};
  std::memcpy(tail, row + 2 * t, static_cast<size_t>(left > 0 ? left : 0) * 2);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(tail));
}

struct Avx2LoadBf16 {
  SY_AVX2_LOADER static __m256 Widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  SY_AVX2_LOADER static __m256 Load(const uint8_t* row, int64_t t) {
    return Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * t)));
  }
  SY_AVX2_LOADER static __m256 Load(const uint8_t* row, int64_t t, int64_t left) {
    return Widen(Load16Bit(row, t, left));
  }
};

struct Avx2LoadF16 {
  SY_AVX2_LOADER static __m256 Load(const uint8_t* row, int64_t t) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * t)));
  }
  SY_AVX2_LOADER static __m256 Load(const uint8_t* row, int64_t t, int64_t left) {
    return _mm256_cvtph_ps(Load16Bit(row, t, left));
  }
};

// The f16 scale that starts a Q8_0 block, as f32.
SY_AVX2_LOADER inline float Avx2Q8BlockScale(const uint8_t* block) {
  uint16_t bits;
  std::memcpy(&bits, block, sizeof(bits));
  return _cvtsh_ss(bits);
}

// Sum of the 8 lanes.
SY_AVX2_LOADER inline float Avx2ReduceAdd(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Lane c < 4 of the result: the sum of the 8 lanes of a_c.
SY_AVX2_LOADER inline __m128 Avx2ReduceAdd4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Largest of the 8 lanes.
SY_AVX2_LOADER inline float Avx2ReduceMax(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

}  // namespace switchyard::runtime::cpu

#undef SY_AVX2_LOADER
