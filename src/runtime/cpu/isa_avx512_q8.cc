// Q8_0 x quantized-activation kernels on AVX-512 VNNI int8 dot products (vpdpbusd).
//
// Activations are quantized per row into 32-element blocks like the weights (scale =
// max|x| / 127, kept in f32 rather than f16), so each block's dot product is exact int32
// arithmetic scaled once by both block scales. vpdpbusd multiplies unsigned by signed
// bytes: activations are stored offset by +128 as u8, and each block's int32 sum gets
// 128 * sum(w) taken back off. Compiled for its target by the pragma below and reached
// only through Avx512Q8Kernels(), after CpuSupportsAvx512Vnni() said yes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/internal/isa_kernels.h"

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

constexpr int64_t kBlock = kQ8_0BlockElems;

float BlockScale(const uint8_t* block) {
  uint16_t bits;
  std::memcpy(&bits, block, sizeof(bits));
  return _cvtsh_ss(bits);
}

void Quantize(const float* x, int64_t k, uint8_t* q, float* scales) {
  const __m512i offset = _mm512_set1_epi32(128);
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kBlock);
    const __m512 v1 = _mm512_loadu_ps(x + b * kBlock + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const ActivationBlockScale block_scale = ActivationScaleFor(amax);
    const float scale = block_scale.scale;
    const __m512 inv = _mm512_set1_ps(block_scale.inv);
    const __m512i q0 = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)), offset);
    const __m512i q1 = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv)), offset);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kBlock), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kBlock + 16), _mm512_cvtepi32_epi8(q1));
    scales[b] = scale;
  }
}

// Two consecutive blocks (the second absent when `two` is false) of a Q8_0 row as one
// register of signed bytes, and their scales spread over the matching 8-lane halves.
struct BlockPair {
  __m512i qs;
  __m512 scale;
};

BlockPair LoadPair(const uint8_t* block, bool two) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  const float s0 = BlockScale(block);
  if (!two) {
    return {_mm512_zextsi256_si512(lo), _mm512_maskz_mov_ps(0x00ff, _mm512_set1_ps(s0))};
  }
  const __m256i hi =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQ8_0BlockBytes + 2));
  const float s1 = BlockScale(block + kQ8_0BlockBytes);
  return {_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
          _mm512_mask_mov_ps(_mm512_set1_ps(s0), 0xff00, _mm512_set1_ps(s1))};
}

// N activation rows against weight rows [m_begin, m_end). xs holds each row's block
// scales spread 8 lanes per block (PairScales layout), so a block pair's scales are one
// 16-float load.
template <int N>
void DotRowsN(const uint8_t* xq, const float* xs, int64_t k, const uint8_t* w, size_t w_row_bytes,
              int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  const int64_t blocks = k / kBlock;
  const int64_t xs_stride = (blocks + 1) / 2 * 16;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t j = m_begin; j < m_end; ++j) {
    const uint8_t* row = w + static_cast<size_t>(j) * w_row_bytes;
    __m512 acc[N];
    for (int i = 0; i < N; ++i)
      acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b += 2) {
      const bool two = b + 1 < blocks;
      const BlockPair pair = LoadPair(row + b * kQ8_0BlockBytes, two);
      const __m512i correction = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, pair.qs);
      for (int i = 0; i < N; ++i) {
        const __m512i xv = two ? _mm512_loadu_si512(xq + i * k + b * kBlock)
                               : _mm512_zextsi256_si512(_mm256_loadu_si256(
                                     reinterpret_cast<const __m256i*>(xq + i * k + b * kBlock)));
        const __m512i dot =
            _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xv, pair.qs), correction);
        const __m512 scale = _mm512_mul_ps(pair.scale, _mm512_loadu_ps(xs + i * xs_stride + b * 8));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[i]);
      }
    }
    for (int i = 0; i < N; ++i)
      out[i * ldo + j] = _mm512_reduce_add_ps(acc[i]);
  }
}

void DotRows(const uint8_t* xq, const float* xs, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  // Weight rows go in blocks that stay in L1/L2 while every group of activation rows
  // passes over them, so the weights stream from memory once whatever n is.
  constexpr int64_t kRowBlock = 8;
  const int64_t xs_stride = (k / kBlock + 1) / 2 * 16;
  for (int64_t j0 = m_begin; j0 < m_end; j0 += kRowBlock) {
    const int64_t j1 = std::min(m_end, j0 + kRowBlock);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      DotRowsN<4>(xq + i * k, xs + i * xs_stride, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
    }
    switch (n - i) {
      case 3:
        DotRowsN<3>(xq + i * k, xs + i * xs_stride, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
        break;
      case 2:
        DotRowsN<2>(xq + i * k, xs + i * xs_stride, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
        break;
      case 1:
        DotRowsN<1>(xq + i * k, xs + i * xs_stride, k, w, w_row_bytes, j0, j1, out + i * ldo, ldo);
        break;
      default:
        break;
    }
  }
}

// Packed panel (isa_kernels.h): per block, bytes [quad][col][4] hold weight row col's
// elements 4*quad..4*quad+3, so one 64-byte load gives 16 columns' 4-element groups, the
// shape vpdpbusd wants; then the rows' fp16 scales and int16 sums.
void PackPanel(const uint8_t* w, size_t w_row_bytes, int64_t j0, int64_t rows, int64_t b0,
               int64_t num_blocks, uint8_t* panel) {
  for (int64_t bb = 0; bb < num_blocks; ++bb) {
    uint8_t* qs = panel + bb * kQ8PanelStride;
    auto* scales = reinterpret_cast<uint16_t*>(qs + kQ8PanelScales);
    auto* sums = reinterpret_cast<int16_t*>(qs + kQ8PanelSums);
    for (int64_t c = 0; c < kPanelRows; ++c) {
      if (c >= rows) {
        for (int64_t quad = 0; quad < kBlock / 4; ++quad)
          std::memset(qs + (quad * kPanelRows + c) * 4, 0, 4);
        scales[c] = 0;
        sums[c] = 0;
        continue;
      }
      const uint8_t* block =
          w + static_cast<size_t>(j0 + c) * w_row_bytes + (b0 + bb) * kQ8_0BlockBytes;
      std::memcpy(&scales[c], block, sizeof(uint16_t));
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      // q summed in groups of 4 (1 as vpdpbusd's unsigned operand).
      const __m256i parts = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
      alignas(32) int32_t quads[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(quads), q);
      for (int64_t quad = 0; quad < kBlock / 4; ++quad)
        std::memcpy(qs + (quad * kPanelRows + c) * 4, &quads[quad], 4);
      alignas(32) int32_t part[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(part), parts);
      int32_t total = 0;
      for (int32_t v : part)
        total += v;
      sums[c] = static_cast<int16_t>(total);  // |total| <= 32 * 128
    }
  }
}

// The 16 int32 lanes of `sums16` (int16 sums of block values) times -128: the term that
// takes the +128 offset of the activations back off.
__m512i Correction(const uint8_t* sums16) {
  const __m512i sums =
      _mm512_cvtepi16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums16)));
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 7));
}

// MR activation rows x 32 panel columns over num_blocks blocks.
template <int MR>
void GemmTile(const uint8_t* xq, int64_t ldq, const float* xs, int64_t lds, const uint8_t* panel,
              int64_t num_blocks, float* out, int64_t ldo, int64_t cols, bool accumulate) {
  __m512 acc0[MR];
  __m512 acc1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t bb = 0; bb < num_blocks; ++bb) {
    const uint8_t* qs = panel + bb * kQ8PanelStride;
    const __m512i corr0 = Correction(qs + kQ8PanelSums);
    const __m512i corr1 = Correction(qs + kQ8PanelSums + 32);
    __m512i dot0[MR];
    __m512i dot1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      dot0[r] = corr0;
      dot1[r] = corr1;
    }
#pragma GCC unroll 8
    for (int64_t quad = 0; quad < kBlock / 4; ++quad) {
      const __m512i w0 = _mm512_load_si512(qs + quad * kPanelRows * 4);
      const __m512i w1 = _mm512_load_si512(qs + quad * kPanelRows * 4 + 64);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t a;
        std::memcpy(&a, xq + r * ldq + bb * kBlock + quad * 4, sizeof(a));
        const __m512i av = _mm512_set1_epi32(a);
        dot0[r] = _mm512_dpbusd_epi32(dot0[r], av, w0);
        dot1[r] = _mm512_dpbusd_epi32(dot1[r], av, w1);
      }
    }
    const __m512 ws0 =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(qs + kQ8PanelScales)));
    const __m512 ws1 = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + kQ8PanelScales + 32)));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 xsv = _mm512_set1_ps(xs[r * lds + bb]);
      acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0[r]), _mm512_mul_ps(xsv, ws0), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1[r]), _mm512_mul_ps(xsv, ws1), acc1[r]);
    }
  }
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32   ? 0xffff
                                              : cols <= 16 ? 0
                                                           : (1u << (cols - 16)) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* o = out + r * ldo;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(acc0[r], _mm512_maskz_loadu_ps(m0, o));
      acc1[r] = _mm512_add_ps(acc1[r], _mm512_maskz_loadu_ps(m1, o + 16));
    }
    _mm512_mask_storeu_ps(o, m0, acc0[r]);
    _mm512_mask_storeu_ps(o + 16, m1, acc1[r]);
  }
}

void GemmPanel(const uint8_t* xq, int64_t ldq, const float* xs, int64_t lds, int64_t n,
               const uint8_t* panel, int64_t num_blocks, float* out, int64_t ldo, int64_t cols,
               bool accumulate) {
  constexpr int kMr = 4;
  int64_t i = 0;
  for (; i + kMr <= n; i += kMr) {
    GemmTile<kMr>(xq + i * ldq, ldq, xs + i * lds, lds, panel, num_blocks, out + i * ldo, ldo, cols,
                  accumulate);
  }
  switch (n - i) {
    case 3:
      return GemmTile<3>(xq + i * ldq, ldq, xs + i * lds, lds, panel, num_blocks, out + i * ldo,
                         ldo, cols, accumulate);
    case 2:
      return GemmTile<2>(xq + i * ldq, ldq, xs + i * lds, lds, panel, num_blocks, out + i * ldo,
                         ldo, cols, accumulate);
    case 1:
      return GemmTile<1>(xq + i * ldq, ldq, xs + i * lds, lds, panel, num_blocks, out + i * ldo,
                         ldo, cols, accumulate);
    default:
      return;
  }
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

const Q8Kernels& Avx512Q8Kernels() {
  static constexpr Q8Kernels kKernels = {&Quantize, &DotRows, &PackPanel, &GemmPanel,
                                         kAvx512StreamingRows};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
