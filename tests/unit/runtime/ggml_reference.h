// Test-side view of GGML's quantized blocks: random valid blocks, and a double-precision
// dequantisation written from llama.cpp's block descriptions independently of
// runtime/ggml_dequantize.cc, for the kernels' references.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/float16.h"

namespace switchyard::runtime::testing {

inline double RefHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Sub-block j's 6-bit scale (which == 0) or min (which == 1) of a Q4_K/Q5_K super-block's
// 12 `scales` bytes: scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 and 4-7;
// sub-blocks 4-7 take their low 4 bits from bytes 8-11 (scale: low nibble, min: high) and
// their top 2 bits from the top bits of bytes 0-3 (scales) or 4-7 (mins).
inline int RefScaleMin(const uint8_t* s, int j, int which) {
  if (j < 4)
    return s[j + 4 * which] & 63;
  const int low = which == 0 ? (s[j + 4] & 0xF) : (s[j + 4] >> 4);
  return low | ((s[j - 4 + 4 * which] >> 6) << 4);
}

// n elements (whole blocks) of `dtype` at p, in double.
inline std::vector<double> RefDequantize(DType dtype, const uint8_t* p, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  const int64_t bn = DTypeBlockElems(dtype);
  const int64_t bb = DTypeBlockBytes(dtype);
  for (int64_t b = 0; b < n / bn; ++b) {
    const uint8_t* blk = p + b * bb;
    double* y = out.data() + b * bn;
    switch (dtype) {
      case DType::kQ4_0:
      case DType::kQ4_1:
      case DType::kQ5_0:
      case DType::kQ5_1: {
        const bool has_min = dtype == DType::kQ4_1 || dtype == DType::kQ5_1;
        const bool five = dtype == DType::kQ5_0 || dtype == DType::kQ5_1;
        const double d = RefHalf(blk);
        const double m = has_min ? RefHalf(blk + 2) : 0.0;
        const uint8_t* qh = blk + (has_min ? 4 : 2);
        const uint8_t* qs = qh + (five ? 4 : 0);
        for (int e = 0; e < 32; ++e) {
          int q = e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4);
          if (five)
            q |= ((qh[e / 8] >> (e % 8)) & 1) << 4;
          const int offset = has_min ? 0 : (five ? 16 : 8);
          y[e] = d * (q - offset) + m;
        }
        break;
      }
      case DType::kQ4_K:
      case DType::kQ5_K: {
        const bool five = dtype == DType::kQ5_K;
        const double d = RefHalf(blk), dmin = RefHalf(blk + 2);
        const uint8_t* scales = blk + 4;
        const uint8_t* qh = blk + 16;
        const uint8_t* qs = blk + (five ? 48 : 16);
        for (int e = 0; e < 256; ++e) {
          const int sub = e / 32, l = e % 32;
          const uint8_t byte = qs[32 * (sub / 2) + l];
          int q = sub % 2 == 0 ? (byte & 0xF) : (byte >> 4);
          if (five)
            q |= ((qh[l] >> sub) & 1) << 4;
          y[e] = d * RefScaleMin(scales, sub, 0) * q - dmin * RefScaleMin(scales, sub, 1);
        }
        break;
      }
      case DType::kQ6_K: {
        const uint8_t* ql = blk;
        const uint8_t* qh = blk + 128;
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
        const double d = RefHalf(blk + 208);
        for (int e = 0; e < 256; ++e) {
          const int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
          const uint8_t low_byte = ql[64 * half + 32 * (quarter % 2) + l];
          const int low = quarter < 2 ? (low_byte & 0xF) : (low_byte >> 4);
          const int high = (qh[32 * half + l] >> (2 * quarter)) & 3;
          y[e] = d * sc[8 * half + 2 * quarter + l / 16] * ((low | (high << 4)) - 32);
        }
        break;
      }
      case DType::kQ2_K:
      case DType::kQ3_K: {
        // Element e: half n = e / 128, j = (e % 128) / 32, l = e % 32; its 2 low bits are
        // bits 2 j of qs[32 n + l]; sub-block e / 16.
        const bool three = dtype == DType::kQ3_K;
        const uint8_t* qs = blk + (three ? 32 : 16);
        for (int e = 0; e < 256; ++e) {
          const int half = e / 128, j = (e % 128) / 32, l = e % 32, sub = e / 16;
          const int low = (qs[32 * half + l] >> (2 * j)) & 3;
          if (three) {
            const uint8_t* sc = blk + 96;
            const int low4 = sub < 8 ? (sc[sub] & 0xF) : (sc[sub - 8] >> 4);
            const int scale = low4 | (((sc[8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4);
            const int high = (blk[l] >> (4 * half + j)) & 1;
            y[e] = RefHalf(blk + 108) * (scale - 32) * (low + 4 * high - 4);
          } else {
            const uint8_t sc = blk[sub];
            y[e] = RefHalf(blk + 80) * (sc & 0xF) * low - RefHalf(blk + 82) * (sc >> 4);
          }
        }
        break;
      }
      default:
        break;
    }
  }
  return out;
}

// `rows` rows of `cols` elements of random valid blocks: random bytes, with the fp16
// scale fields set to finite values of ordinary size (so rows' values stay within a few
// units).
inline std::vector<uint8_t> RandomGgmlRows(DType dtype, int64_t rows, int64_t cols,
                                           std::mt19937& rng) {
  const size_t row_bytes = RowBytes(dtype, cols);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes)
    b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  auto set_half = [&](uint8_t* p, float v) {
    const uint16_t h = F32ToF16(v);
    std::memcpy(p, &h, 2);
  };
  const int64_t bb = DTypeBlockBytes(dtype);
  for (size_t off = 0; off < bytes.size(); off += static_cast<size_t>(bb)) {
    uint8_t* blk = bytes.data() + off;
    switch (dtype) {
      case DType::kQ4_1:
      case DType::kQ5_1:
        set_half(blk, scale(rng));
        set_half(blk + 2, -8 * scale(rng));
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:
        set_half(blk, scale(rng) / 16);
        set_half(blk + 2, scale(rng) / 16);
        break;
      case DType::kQ6_K:
        set_half(blk + 208, scale(rng) / 32);
        break;
      case DType::kQ2_K:
        set_half(blk + 80, scale(rng));
        set_half(blk + 82, scale(rng));
        break;
      case DType::kQ3_K:
        set_half(blk + 108, scale(rng) / 8);
        break;
      default:
        set_half(blk, scale(rng));
        break;
    }
  }
  return bytes;
}

inline constexpr DType kGgmlQuantTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                            DType::kQ5_1, DType::kQ4_K, DType::kQ5_K,
                                            DType::kQ6_K, DType::kQ2_K, DType::kQ3_K};

}  // namespace switchyard::runtime::testing
