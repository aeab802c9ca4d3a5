// GGML's quantized block layouts (llama.cpp's ggml-common.h), exactly as GGUF stores them,
// and their exact dequantisation to f32 in the order llama.cpp computes it. Pure functions;
// callable from any thread.
//
// Every type here decodes to w = s * q - m with q an unsigned integer below 64: Q4_0 and
// Q5_0 subtract a fixed offset (m = 8 d, 16 d), Q4_1 and Q5_1 add a stored min, the K types
// split a 256-element super-block into sub-blocks with 4-bit (Q2_K), 6-bit (Q3_K, Q4_K,
// Q5_K) or int8 (Q6_K) scales. Blocks start on any byte (GGUF packs them without alignment), so
// fields are read with memcpy.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace switchyard::runtime {

inline constexpr int64_t kQuantBlockElems = 32;   // Q4_0, Q4_1, Q5_0, Q5_1.
inline constexpr int64_t kSuperBlockElems = 256;  // Q4_K, Q5_K, Q6_K.

// d: scale; qs[j]: element j (low nibble) and j + 16 (high nibble), offset by 8.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// Element = d * nibble + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
// As Q4_0 with a fifth bit: bit j of qh (little-endian u32) is element j's, bit j + 16
// element j + 16's; offset by 16.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// Eight sub-blocks of 32: sub-block s has 6-bit scale sc_s and min m_s packed in `scales`
// (GetScaleMinK4), element = d * sc_s * q - dmin * m_s. qs[32 i + l] holds element
// 64 i + l (low nibble) and 64 i + 32 + l (high nibble).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// As Q4_K with a fifth bit: bit 2 i of qh[l] for element 64 i + l, bit 2 i + 1 for
// element 64 i + 32 + l.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Sixteen sub-blocks of 16 with int8 scales; element = d * scales[s] * (q - 32), q 6-bit:
// low 4 bits in ql, high 2 bits in qh (see DequantizeQ6K for the interleave).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Sixteen sub-blocks of 16 with 4-bit scales and mins: scales[s] low nibble scale, high
// nibble min; element = d * scale_s * q - dmin * min_s, q 2-bit: chunk 4 n + j (n: which
// 128-element half) is bits 2 j, 2 j + 1 of qs[32 n + l], l < 32.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
// Sixteen sub-blocks of 16 with 6-bit scales (Q3KScale); element = d * (scale_s - 32) *
// (q - 4), q 3-bit: low 2 bits as Q2_K's, high bit = bit 4 n + j of hmask[l].
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockQ6_K) == 210 && sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);

// Sub-block j's (j < 8) 6-bit scale and min of a Q4_K/Q5_K `scales` field.
inline void GetScaleMinK4(int64_t j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Sub-block j's (j < 16) 6-bit scale of a Q3_K `scales` field: the low 4 bits are the low
// (j < 8) or high (j >= 8) nibble of byte j % 8, the top 2 bits are bits 2 (j / 4) and
// 2 (j / 4) + 1 of byte 8 + j % 4.
inline int Q3KScale(const uint8_t* q, int64_t j) {
  const int low = j < 8 ? (q[j] & 0xF) : (q[j - 8] >> 4);
  return low | (((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// Converts n elements of a type above at src to f32, as llama.cpp's dequantize_row_*.
// REQUIRES: IsGgmlQuantDType(dtype); n % DTypeBlockElems(dtype) == 0.
void DequantizeGgmlRow(DType dtype, const void* src, int64_t n, float* out);

}  // namespace switchyard::runtime
