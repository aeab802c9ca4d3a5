// Per-instruction-set inner loops of the CPU backend. Each table is stateless and
// callable from any thread; the drivers in runtime/cpu/*.cc split work across the pool
// and call these on disjoint outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/cpu/cpu_backend.h"
#include "runtime/dtype.h"
#include "runtime/float16.h"

namespace switchyard::runtime::cpu {

// Width of a packed weight panel: GEMM packs 32 weight rows, k-major, as f32.
inline constexpr int64_t kPanelRows = 32;
// Panels of kPanelRows rows that m weight rows make (the last one may be short).
constexpr int64_t NumPanels(int64_t m) {
  return (m + kPanelRows - 1) / kPanelRows;
}
// Bytes of one Q8_0 block of a packed int8 panel: 32 rows x 32 int8.
inline constexpr int64_t kQ8PanelBlockBytes = kPanelRows * kQ8_0BlockElems;

// `count` KV rows of one kv head spread over paged blocks: row p starts at
// blocks[p / block_rows] + (p % block_rows) * row_stride bytes.
struct KvRows {
  const uint8_t* const* blocks;
  int64_t block_rows;
  size_t row_stride;
  int64_t count;

  const uint8_t* row(int64_t p) const {
    return blocks[p / block_rows] + static_cast<size_t>(p % block_rows) * row_stride;
  }
  // group[i] = row(p0 + i) for i < n; past count, the last row again (callers do not store
  // its results). REQUIRES: p0 < count.
  void Gather(int64_t p0, int64_t n, const uint8_t* group[]) const {
    const int64_t have = count - p0 < n ? count - p0 : n;
    int64_t b = p0 / block_rows;
    int64_t offset = p0 % block_rows;
    for (int64_t i = 0; i < have; ++i) {
      group[i] = blocks[b] + static_cast<size_t>(offset) * row_stride;
      if (++offset == block_rows) {
        offset = 0;
        ++b;
      }
    }
    for (int64_t i = have; i < n; ++i)
      group[i] = group[have - 1];
  }
  // Rows in block b: block_rows except for a short last block.
  int64_t rows_in_block(int64_t b) const {
    return count - b * block_rows < block_rows ? count - b * block_rows : block_rows;
  }
};

// The scale of one block of 32 activations quantized to int8 whose largest magnitude is
// amax, and the factor that quantizes them (q = round(x * inv)), as llama.cpp's x86 code
// computes them for its Q8_0/Q8_1 activation blocks: the scale is amax / 127 rounded to
// fp16 (the blocks store it so), inv is 127 / amax unrounded. Matching it keeps greedy
// decoding on the same side of near ties as llama.cpp on the same weights.
struct ActivationBlockScale {
  float scale;
  float inv;
};
inline ActivationBlockScale ActivationScaleFor(float amax) {
  return {F16ToF32(F32ToF16(amax / 127.0f)), amax != 0.0f ? 127.0f / amax : 0.0f};
}

struct IsaKernels {
  // For weight rows j in [m_begin, m_end) and activation rows i in [0, n):
  //   out[i * ldo + j] = sum_t x[i * k + t] * w_j[t],  w_j at w + j * w_row_bytes.
  // REQUIRES: w_dtype is a weight dtype; k % 32 == 0 for Q8_0.
  void (*dot_rows)(DType w_dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
  // For rows i in [0, n) and panel columns c in [0, cols):
  //   out[i * ldo + c] (+)= sum_t a[i * lda + t] * panel[t * kPanelRows + c], t < kc.
  // Adds to out when accumulate, else overwrites. REQUIRES: cols <= kPanelRows.
  void (*gemm_panel)(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc,
                     float* out, int64_t ldo, int64_t cols, bool accumulate);
  // Packs w rows [0, rows) x columns [t0, t0 + kc) into panel[t * kPanelRows + r] as
  // f32 (rows past `rows` are zero); row r starts at w + r * w_row_bytes.
  // REQUIRES: panel 64-byte aligned; kc <= kMaxPackColumns; t0 and kc multiples of 32
  // for Q8_0.
  void (*pack_panel)(DType w_dtype, const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0,
                     int64_t kc, float* panel);
  // out[t] = src[t] as f32 for t < n. REQUIRES: dtype F32/F16/BF16/Q8_0 (n % 32 == 0).
  void (*to_f32)(DType dtype, const void* src, int64_t n, float* out);
  // dst[t] = src[t] rounded to `dtype` (nearest even) for t < n. REQUIRES: F32/F16/BF16.
  void (*from_f32)(DType dtype, const float* src, int64_t n, void* dst);
  // sum_t a[t] * b[t].
  float (*dot)(const float* a, const float* b, int64_t len);

  // Attention of `num_q` query vectors (q, [num_q, head_dim]) over the KV rows of one kv
  // head described by `rows` (head_dim elements of kv_dtype each: F32, F16 or BF16); q,
  // scores, probs and acc are f32.
  //   kv_scores:     scores[r * lds + p] = scale * sum_t q[r * head_dim + t] * K_p[t]
  //   kv_accumulate: acc[r * head_dim + t] += sum_p probs[r * lds + p] * V_p[t]
  // for r < num_q, p < rows.count, t < head_dim. Each vector's results depend only on its
  // own inputs and, for kv_scores, on `by_columns`: the summation order (the ISA's column
  // order, which pays from min_column_score_queries vectors on, or its row order), so that
  // a caller can make a vector's scores the same whatever other vectors share the call.
  void (*kv_scores)(DType kv_dtype, const float* q, int64_t num_q, int64_t head_dim,
                    const KvRows& rows, float scale, float* scores, int64_t lds, bool by_columns);
  void (*kv_accumulate)(DType kv_dtype, const float* probs, int64_t lds, int64_t num_q,
                        int64_t head_dim, const KvRows& rows, float* acc);
  // One online-softmax step over n > 0 scores: *max = max(*max, x[0..n)), then
  // x[t] = exp(x[t] - *max); returns the sum of the new x.
  float (*softmax_step)(float* x, int64_t n, float* max);
  // out[t] = silu(gate[t]) * up[t], silu(g) = g / (1 + exp(-g)), for t < n. out may alias
  // gate or up.
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out);
  // Activation rows up to which MatMul takes dot_rows; more take the panels.
  int64_t max_streaming_rows;
  // Query vectors per kv_scores call from which its column order is the faster.
  int64_t min_column_score_queries;
};

// A packed int8 panel of kPanelRows Q8_0 weight rows is a run of blocks, one per Q8_0
// block of the rows, kQ8PanelStride bytes each (64-byte aligned). In a block, byte
// (quad * kPanelRows + row) * 4 + e is the row's element 4 * quad + e; then come the rows'
// scales as stored (fp16, from kQ8PanelScales) and the sums of their 32 int8 values (int16,
// from kQ8PanelSums). Rows past the panel's are zero. 6% more bytes than the Q8_0 blocks
// themselves, so a panel kept from load serves decode too (packed_weights.h).
inline constexpr int64_t kQ8PanelScales = kQ8PanelBlockBytes;
inline constexpr int64_t kQ8PanelSums = kQ8PanelScales + kPanelRows * 2;
inline constexpr int64_t kQ8PanelStride = kQ8PanelSums + kPanelRows * 2;
static_assert(kQ8PanelStride % 64 == 0);

// MatMul by Q8_0 weights with activations quantized to int8 blocks, where the CPU has
// int8 products: AVX-512 VNNI (isa_avx512_q8.cc, both shapes) and AVX2 (isa_avx2_q8.cc,
// few rows only).
struct Q8Kernels {
  // Quantizes one activation row into k bytes of this table's int8 form (round(x[t] / s_b),
  // stored offset by +128 as u8 for VNNI, as s8 for AVX2) and scales[b] = s_b = max|x| /
  // 127 over block b = t / 32. REQUIRES: k % 32 == 0.
  void (*quantize)(const float* x, int64_t k, uint8_t* q, float* scales);
  // Like IsaKernels::dot_rows for n quantized activation rows (row i at xq + i * k) whose
  // scales are spread out: xs[i * S + 8 * b + l] = s_b for l < 8, S = 16 * ceil(k / 64),
  // zero for a missing odd last block.
  void (*dot_rows)(const uint8_t* xq, const float* xs, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
  // The panel shape; both null where int8 products do not beat the f32 panels (AVX2), and
  // MatMul takes those for many rows.
  // Packs weight rows [j0, j0 + rows) (rows <= kPanelRows), blocks [b0, b0 + num_blocks),
  // into num_blocks * kQ8PanelStride bytes at panel (64-byte aligned).
  void (*pack_panel)(const uint8_t* w, size_t w_row_bytes, int64_t j0, int64_t rows, int64_t b0,
                     int64_t num_blocks, uint8_t* panel);
  // out[i * ldo + c] (+)= sum over the panel's blocks of activation row i (at xq + i * ldq,
  // block scales at xs + i * lds) with panel column c, for i < n, c < cols.
  void (*gemm_panel)(const uint8_t* xq, int64_t ldq, const float* xs, int64_t lds, int64_t n,
                     const uint8_t* panel, int64_t num_blocks, float* out, int64_t ldo,
                     int64_t cols, bool accumulate);
  // Activation rows up to which MatMul takes dot_rows; more take the panels (this table's,
  // or the f32 ones where it has none).
  int64_t max_streaming_rows;
};

// Activation rows quantized for QuantKernels (see quant_decode.h for the weights' side),
// per 32-element chunk c of row i: int8 values q[i * ldq + 32 c + t] = round(x / s_c) with
// s_c = max|x over c| / 127; lane scales s[i * ldq / 4 + 8 c + l] = s_c (l < 8); and
// m[i * ldq / 16 + 2 c + h] = s_c * (sum of the chunk's 16 values of half h). ldq is k
// rounded up to a whole group (256); everything past k is zero.
struct QuantActivations {
  const int8_t* q;
  const float* s;
  const float* m;
  int64_t ldq;
};

// One packed panel of kPanelRows weight rows of a GGML quantized type over some chunks
// (quant_decode.h's form): for chunk cc, q[cc * kQ8PanelBlockBytes + (quad * kPanelRows +
// row) * 4 + e] is the row's unsigned value of element 4 * quad + e of the chunk;
// scales[(cc * 2 + h) * kPanelRows + row] and mins[...] its half h's scale and min. All
// 64-byte aligned; rows past the panel's are zero.
struct QuantPanel {
  uint8_t* q;
  float* scales;
  float* mins;
};

// MatMul by GGML quantized weights (IsGgmlQuantDType) on int8 dot products with
// quantized activations, as llama.cpp does: AVX-512 VNNI (isa_avx512_quant.cc, both
// shapes) and AVX2 (isa_avx2_quant.cc, few rows only).
struct QuantKernels {
  // Quantizes one activation row of k floats into QuantActivations form: q (ldq int8),
  // s (ldq / 4 lane scales) and m (ldq / 16 half sums), zero past k.
  // REQUIRES: k % 32 == 0; ldq a multiple of 256, >= k.
  void (*quantize)(const float* x, int64_t k, int64_t ldq, int8_t* q, float* s, float* m);
  // Like IsaKernels::dot_rows for n quantized activation rows.
  void (*dot_rows)(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
  // The same from the weight bytes straight into registers (quant_gemv.h), for the
  // decode shape: MatMul takes it over dot_rows for n <= max_gemv_rows where
  // HasDirectGemv(w_dtype).
  void (*gemv)(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k, const uint8_t* w,
               size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
  int64_t max_gemv_rows;
  // The panel shape; both null where the f32 panels serve many rows (AVX2).
  // Packs weight rows [j0, j0 + rows) (rows <= kPanelRows) over groups [g0, g0 +
  // num_groups) of 256 elements, `chunks` chunks in all (the last group may be short).
  void (*pack_panel)(DType w_dtype, const uint8_t* w, size_t w_row_bytes, int64_t j0, int64_t rows,
                     int64_t g0, int64_t num_groups, int64_t chunks, QuantPanel* panel);
  // out[i * ldo + c] (+)= sum over the panel's chunks (starting at chunk c0 of the
  // activations) of activation row i with panel column c, for i < n, c < cols.
  void (*gemm_panel)(const QuantActivations& x, int64_t c0, int64_t n, const QuantPanel& panel,
                     int64_t chunks, bool split_halves, float* out, int64_t ldo, int64_t cols,
                     bool accumulate);
  // Activation rows up to which MatMul takes dot_rows; more take the panels (this table's,
  // or the f32 ones where it has none).
  int64_t max_streaming_rows;
};

// MatMul by BF16 weights with activations rounded to bf16, on AVX512_BF16 dot products
// (vdpbf16ps: pairs of bf16 products summed into f32 lanes; see isa_avx512_bf16.cc).
// Activation rows are stored as bf16 with an even stride, padded with a zero.
struct Bf16Kernels {
  // dst[t] = x[t] rounded to bf16 (nearest even) for t < k, and dst[k] = 0 when k is odd.
  void (*round_row)(const float* x, int64_t k, uint16_t* dst);
  // Like IsaKernels::dot_rows for BF16 weights and n rounded activation rows (row i at
  // x + i * ldx, ldx = k rounded up to even).
  void (*dot_rows)(const uint16_t* x, int64_t ldx, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
  // Packs w rows [0, rows) x columns [t0, t0 + kc) as bf16 pairs:
  // panel[p * kPanelRows + r] holds row r's elements t0 + 2p (low half) and t0 + 2p + 1,
  // zero past `rows` or past kc. REQUIRES: panel 64-byte aligned; kc <= kMaxPackColumns.
  void (*pack_panel)(const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0, int64_t kc,
                     uint32_t* panel);
  // out[i * ldo + c] (+)= sum over p < pairs of the pair products of activation row i
  // (elements 2p, 2p + 1 at a + i * lda) and panel column c, for i < n, c < cols.
  void (*gemm_panel)(const uint16_t* a, int64_t lda, int64_t n, const uint32_t* panel,
                     int64_t pairs, float* out, int64_t ldo, int64_t cols, bool accumulate);
  // Activation rows up to which MatMul takes dot_rows; more take the panels.
  int64_t max_streaming_rows;
};

// The tables' max_streaming_rows. Measured with BM_SmallBatch_* in
// bench/runtime_matmul_benchmark.cc (weights cold, 1 thread) for BF16 and Q8_0 weights of
// k x m = 2048 x 2048 and 576 x 1536:
// - AVX-512 (and portable, unmeasured): streaming at n = 16 took 0.74-0.96x the time of
//   the panels at n = 17.
// - AVX2 (4 x 3 f32 tiles, int8 Q8_0 rows, no int8 panels): streaming took 0.65-0.80x
//   the time of the panels at n = 24-32 and 0.83-0.98x at n = 48; at 64, 0.90-1.07x.
inline constexpr int64_t kAvx512StreamingRows = 16;
inline constexpr int64_t kPortableStreamingRows = 16;
inline constexpr int64_t kAvx2StreamingRows = 48;
// Activation rows up to which the quantized GEMV reads weights straight into registers
// (QuantKernels::gemv): decode batches; more rows share one decoded copy (dot_rows).
inline constexpr int64_t kQuantGemvRows = 4;

// Most columns pack_panel is ever asked for at once.
inline constexpr int64_t kMaxPackColumns = 512;

// softmax_step and swiglu on std::exp, for ISAs without a vector exp of their own.
float SoftmaxStepScalar(float* x, int64_t n, float* max);
void SwiGluScalar(const float* gate, const float* up, int64_t n, float* out);

const IsaKernels& PortableKernels();
const IsaKernels& Avx2Kernels();
const IsaKernels& Avx512Kernels();
// Fills the attention and activation members of Avx512Kernels() (isa_avx512_attention.cc).
void SetAvx512AttentionKernels(IsaKernels* kernels);
// Fills the attention and activation members of Avx2Kernels() (isa_avx2_attention.cc).
void SetAvx2AttentionKernels(IsaKernels* kernels);
const IsaKernels& KernelsFor(CpuIsa isa);
// REQUIRES: CpuSupportsAvx512Vnni().
const Q8Kernels& Avx512Q8Kernels();
// REQUIRES: CpuSupportsIsa(kAvx2).
const Q8Kernels& Avx2Q8Kernels();
bool CpuSupportsAvx512Vnni();
// REQUIRES: CpuSupportsAvx512Vnni().
const QuantKernels& Avx512QuantKernels();
// REQUIRES: CpuSupportsIsa(kAvx2).
const QuantKernels& Avx2QuantKernels();
// QuantKernels::gemv on AVX-512 VNNI (isa_avx512_quant_gemv.cc) and on AVX2
// (isa_avx2_quant_gemv.cc), with the CPU requirements of the tables above.
void Avx512QuantGemv(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k,
                     const uint8_t* w, size_t w_row_bytes, int64_t m_begin, int64_t m_end,
                     float* out, int64_t ldo);
void Avx2QuantGemv(DType w_dtype, const QuantActivations& x, int64_t n, int64_t k, const uint8_t* w,
                   size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo);
// REQUIRES: CpuSupportsAvx512Bf16().
const Bf16Kernels& Avx512Bf16Kernels();
bool CpuSupportsAvx512Bf16();

}  // namespace switchyard::runtime::cpu
