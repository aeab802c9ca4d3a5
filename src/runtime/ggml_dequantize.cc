// Scalar dequantisation of GGML's block types, in the operation order of llama.cpp's
// dequantize_row_* so that results match it bit for bit.
#include <cstring>

#include "runtime/float16.h"
#include "runtime/ggml_blocks.h"

namespace switchyard::runtime {
namespace {

template <typename Block>
Block ReadBlock(const uint8_t* bytes, int64_t b) {
  Block block{};
  std::memcpy(&block, bytes + static_cast<size_t>(b) * sizeof(Block), sizeof(Block));
  return block;
}

uint32_t Qh32(const uint8_t qh[4]) {
  uint32_t v;
  std::memcpy(&v, qh, sizeof(v));
  return v;
}

void DequantizeQ4_0(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQuantBlockElems) {
    const auto block = ReadBlock<BlockQ4_0>(src, b);
    const float d = F16ToF32(block.d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((block.qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQuantBlockElems) {
    const auto block = ReadBlock<BlockQ4_1>(src, b);
    const float d = F16ToF32(block.d);
    const float m = F16ToF32(block.m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(block.qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(block.qs[j] >> 4) * d + m;
    }
  }
}

// Element j's and j + 16's 5-bit values of a Q5_0/Q5_1 block.
inline int Q5Low(uint8_t qs, uint32_t qh, int j) {
  return (qs & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10);
}
inline int Q5High(uint8_t qs, uint32_t qh, int j) {
  return (qs >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
}

void DequantizeQ5_0(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQuantBlockElems) {
    const auto block = ReadBlock<BlockQ5_0>(src, b);
    const float d = F16ToF32(block.d);
    const uint32_t qh = Qh32(block.qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(Q5Low(block.qs[j], qh, j) - 16) * d;
      y[j + 16] = static_cast<float>(Q5High(block.qs[j], qh, j) - 16) * d;
    }
  }
}

void DequantizeQ5_1(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b, y += kQuantBlockElems) {
    const auto block = ReadBlock<BlockQ5_1>(src, b);
    const float d = F16ToF32(block.d);
    const float m = F16ToF32(block.m);
    const uint32_t qh = Qh32(block.qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(Q5Low(block.qs[j], qh, j)) * d + m;
      y[j + 16] = static_cast<float>(Q5High(block.qs[j], qh, j)) * d + m;
    }
  }
}

// Q4_K and Q5_K: eight sub-blocks of 32 with 6-bit scales and mins; Q5_K adds a fifth bit
// per element from qh.
template <typename Block, bool kFive>
void DequantizeK45(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b) {
    const auto block = ReadBlock<Block>(src, b);
    const float d = F16ToF32(block.d);
    const float min = F16ToF32(block.dmin);
    const uint8_t* q = block.qs;
    for (int i = 0; i < 4; ++i, q += 32) {
      uint8_t sc, m;
      GetScaleMinK4(2 * i, block.scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      GetScaleMinK4(2 * i + 1, block.scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) {
        int v = q[l] & 0xF;
        if constexpr (kFive)
          v += (block.qh[l] >> (2 * i)) & 1 ? 16 : 0;
        *y++ = d1 * static_cast<float>(v) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        int v = q[l] >> 4;
        if constexpr (kFive)
          v += (block.qh[l] >> (2 * i + 1)) & 1 ? 16 : 0;
        *y++ = d2 * static_cast<float>(v) - m2;
      }
    }
  }
}

void DequantizeQ6_K(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b) {
    const auto block = ReadBlock<BlockQ6_K>(src, b);
    const float d = F16ToF32(block.d);
    const uint8_t* ql = block.ql;
    const uint8_t* qh = block.qh;
    const int8_t* sc = block.scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

// Chunk 4 n + j of a Q2_K/Q3_K super-block: its 2-bit values (bits 2 j of qs[32 n + l]).
inline int Low2(const uint8_t* qs, int c, int l) {
  return (qs[32 * (c / 4) + l] >> (2 * (c % 4))) & 3;
}

void DequantizeQ2_K(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b) {
    const auto block = ReadBlock<BlockQ2_K>(src, b);
    const float d = F16ToF32(block.d);
    const float min = F16ToF32(block.dmin);
    for (int c = 0; c < 8; ++c) {
      for (int h = 0; h < 2; ++h) {
        const uint8_t sc = block.scales[2 * c + h];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = min * static_cast<float>(sc >> 4);
        for (int l = 16 * h; l < 16 * h + 16; ++l)
          *y++ = dl * static_cast<float>(Low2(block.qs, c, l)) - ml;
      }
    }
  }
}

void DequantizeQ3_K(const uint8_t* src, int64_t blocks, float* y) {
  for (int64_t b = 0; b < blocks; ++b) {
    const auto block = ReadBlock<BlockQ3_K>(src, b);
    const float d = F16ToF32(block.d);
    for (int c = 0; c < 8; ++c) {
      for (int h = 0; h < 2; ++h) {
        const float dl = d * static_cast<float>(Q3KScale(block.scales, 2 * c + h) - 32);
        for (int l = 16 * h; l < 16 * h + 16; ++l) {
          const int high = (block.hmask[l] >> c) & 1;
          *y++ = dl * static_cast<float>(Low2(block.qs, c, l) - (high ? 0 : 4));
        }
      }
    }
  }
}

}  // namespace

void DequantizeGgmlRow(DType dtype, const void* src, int64_t n, float* out) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t blocks = n / DTypeBlockElems(dtype);
  switch (dtype) {
    case DType::kQ4_0:
      return DequantizeQ4_0(bytes, blocks, out);
    case DType::kQ4_1:
      return DequantizeQ4_1(bytes, blocks, out);
    case DType::kQ5_0:
      return DequantizeQ5_0(bytes, blocks, out);
    case DType::kQ5_1:
      return DequantizeQ5_1(bytes, blocks, out);
    case DType::kQ4_K:
      return DequantizeK45<BlockQ4_K, false>(bytes, blocks, out);
    case DType::kQ5_K:
      return DequantizeK45<BlockQ5_K, true>(bytes, blocks, out);
    case DType::kQ6_K:
      return DequantizeQ6_K(bytes, blocks, out);
    case DType::kQ2_K:
      return DequantizeQ2_K(bytes, blocks, out);
    case DType::kQ3_K:
      return DequantizeQ3_K(bytes, blocks, out);
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kI32:
      return;
  }
}

}  // namespace switchyard::runtime
