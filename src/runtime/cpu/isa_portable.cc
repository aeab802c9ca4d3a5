// Plain C++ inner loops: the reference-speed fallback for any CPU. Several independent
// accumulators let the compiler vectorize without reassociating a single sum.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/float16.h"

namespace switchyard::runtime::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kChunk = 256;

float Dot(const float* a, const float* b, int64_t len) {
  float acc[kLanes] = {};
  int64_t t = 0;
  for (; t + kLanes <= len; t += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l)
      acc[l] += a[t + l] * b[t + l];
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l)
    sum += acc[l];
  for (; t < len; ++t)
    sum += a[t] * b[t];
  return sum;
}

// K/V rows are converted to f32 kChunk elements at a time.
void KvScores(DType kv_dtype, const float* q, int64_t num_q, int64_t head_dim, const KvRows& rows,
              float scale, float* scores, int64_t lds, bool /*by_columns: one order here*/) {
  float row_f32[kChunk];
  for (int64_t p = 0; p < rows.count; ++p) {
    const uint8_t* row = rows.row(p);
    for (int64_t r = 0; r < num_q; ++r)
      scores[r * lds + p] = 0.0f;
    for (int64_t t0 = 0; t0 < head_dim; t0 += kChunk) {
      const int64_t len = std::min(kChunk, head_dim - t0);
      DequantizeRow(kv_dtype, row + RowBytes(kv_dtype, t0), len, row_f32);
      for (int64_t r = 0; r < num_q; ++r)
        scores[r * lds + p] += Dot(q + r * head_dim + t0, row_f32, len);
    }
    for (int64_t r = 0; r < num_q; ++r)
      scores[r * lds + p] *= scale;
  }
}

void KvAccumulate(DType kv_dtype, const float* probs, int64_t lds, int64_t num_q, int64_t head_dim,
                  const KvRows& rows, float* acc) {
  float row_f32[kChunk];
  for (int64_t p = 0; p < rows.count; ++p) {
    const uint8_t* row = rows.row(p);
    for (int64_t t0 = 0; t0 < head_dim; t0 += kChunk) {
      const int64_t len = std::min(kChunk, head_dim - t0);
      DequantizeRow(kv_dtype, row + RowBytes(kv_dtype, t0), len, row_f32);
      for (int64_t r = 0; r < num_q; ++r) {
        const float w = probs[r * lds + p];
        float* acc_r = acc + r * head_dim + t0;
        for (int64_t t = 0; t < len; ++t)
          acc_r[t] += w * row_f32[t];
      }
    }
  }
}

void DotRows(DType w_dtype, const float* x, int64_t n, int64_t k, const uint8_t* w,
             size_t w_row_bytes, int64_t m_begin, int64_t m_end, float* out, int64_t ldo) {
  float wf[kChunk];
  for (int64_t j = m_begin; j < m_end; ++j) {
    const uint8_t* row = w + static_cast<size_t>(j) * w_row_bytes;
    if (w_dtype == DType::kF32) {
      for (int64_t i = 0; i < n; ++i) {
        out[i * ldo + j] = Dot(x + i * k, reinterpret_cast<const float*>(row), k);
      }
      continue;
    }
    for (int64_t i = 0; i < n; ++i)
      out[i * ldo + j] = 0.0f;
    for (int64_t t0 = 0; t0 < k; t0 += kChunk) {
      const int64_t len = std::min(kChunk, k - t0);
      DequantizeRow(w_dtype, row + RowBytes(w_dtype, t0), len, wf);
      for (int64_t i = 0; i < n; ++i)
        out[i * ldo + j] += Dot(x + i * k + t0, wf, len);
    }
  }
}

void GemmPanel(const float* a, int64_t lda, int64_t n, const float* panel, int64_t kc, float* out,
               int64_t ldo, int64_t cols, bool accumulate) {
  for (int64_t i = 0; i < n; ++i) {
    float acc[kPanelRows] = {};
    const float* ai = a + i * lda;
    for (int64_t t = 0; t < kc; ++t) {
      const float av = ai[t];
      const float* p = panel + t * kPanelRows;
      for (int64_t c = 0; c < kPanelRows; ++c)
        acc[c] += av * p[c];
    }
    float* oi = out + i * ldo;
    for (int64_t c = 0; c < cols; ++c)
      oi[c] = accumulate ? oi[c] + acc[c] : acc[c];
  }
}

void ToF32(DType dtype, const void* src, int64_t n, float* out) {
  DequantizeRow(dtype, src, n, out);
}

void FromF32(DType dtype, const float* src, int64_t n, void* dst) {
  auto* h = static_cast<uint16_t*>(dst);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t t = 0; t < n; ++t)
        h[t] = F32ToF16(src[t]);
      return;
    case DType::kBF16:
      for (int64_t t = 0; t < n; ++t)
        h[t] = F32ToBf16(src[t]);
      return;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kI32:
      return;
  }
}

}  // namespace

float SoftmaxStepScalar(float* x, int64_t n, float* max) {
  float m = *max;
  for (int64_t t = 0; t < n; ++t)
    m = std::max(m, x[t]);
  *max = m;
  float sum = 0.0f;
  for (int64_t t = 0; t < n; ++t) {
    x[t] = std::exp(x[t] - m);
    sum += x[t];
  }
  return sum;
}

void SwiGluScalar(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t t = 0; t < n; ++t)
    out[t] = gate[t] / (1.0f + std::exp(-gate[t])) * up[t];
}

namespace {

// Rows converted with to_f32, transposed in scalar code.
void PackPanel(DType w_dtype, const uint8_t* w, size_t w_row_bytes, int64_t rows, int64_t t0,
               int64_t kc, float* panel) {
  // One row's kc values as f32; kc is at most the GEMM's k block.
  float row_f32[kMaxPackColumns];
  const size_t col_offset = RowBytes(w_dtype, t0);
  for (int64_t r = 0; r < kPanelRows; ++r) {
    if (r >= rows) {
      for (int64_t t = 0; t < kc; ++t)
        panel[t * kPanelRows + r] = 0.0f;
      continue;
    }
    ToF32(w_dtype, w + static_cast<size_t>(r) * w_row_bytes + col_offset, kc, row_f32);
    for (int64_t t = 0; t < kc; ++t)
      panel[t * kPanelRows + r] = row_f32[t];
  }
}

}  // namespace

const IsaKernels& PortableKernels() {
  static constexpr IsaKernels kKernels = {&DotRows,
                                          &GemmPanel,
                                          &PackPanel,
                                          &ToF32,
                                          &FromF32,
                                          &Dot,
                                          &KvScores,
                                          &KvAccumulate,
                                          &SoftmaxStepScalar,
                                          &SwiGluScalar,
                                          kPortableStreamingRows,
                                          /*min_column_score_queries=*/0};
  return kKernels;
}

}  // namespace switchyard::runtime::cpu
