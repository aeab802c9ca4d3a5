// MatMul driver. Few activation rows (decode) are memory-bound: each thread streams its
// share of the weight rows once, converting on the fly (dot_rows). Many rows (prefill) are
// compute-bound: weights are dequantized into f32 panels of kPanelRows rows x kKBlock
// columns (small enough for L1/L2) and every activation row is multiplied against a panel
// while it is hot (gemm_panel), so conversion cost is paid once per panel, not per row.
#include <algorithm>

#include "runtime/cpu/internal/kernels.h"
#include "runtime/float16.h"

namespace switchyard::runtime::cpu {
namespace {

// Activation rows up to which the streaming path wins (measured with
// bench/runtime_matmul_benchmark.cc).
constexpr int64_t kMaxStreamingRows = 16;
// Columns of k per packed panel: 32 rows x 128 f32 = 16 KiB.
constexpr int64_t kKBlock = 128;
// Activation rows per pass over a panel, so the activation block stays in L2.
constexpr int64_t kRowBlock = 256;

// Packs w rows [j0, j0 + rows) x columns [t0, t0 + kc) into panel[t * kPanelRows + r] as f32;
// rows past `rows` are zero.
void PackPanel(const Tensor& w, int64_t j0, int64_t rows, int64_t t0, int64_t kc, float* panel,
               float* scratch) {
  const auto* base = static_cast<const uint8_t*>(w.data());
  const size_t row_bytes = w.row_bytes();
  const size_t col_offset = RowBytes(w.dtype(), t0);
  for (int64_t r = 0; r < kPanelRows; ++r) {
    if (r >= rows) {
      for (int64_t t = 0; t < kc; ++t)
        panel[t * kPanelRows + r] = 0.0f;
      continue;
    }
    const uint8_t* src = base + static_cast<size_t>(j0 + r) * row_bytes + col_offset;
    const float* row;
    if (w.dtype() == DType::kF32) {
      row = reinterpret_cast<const float*>(src);
    } else {
      DequantizeRow(w.dtype(), src, kc, scratch);
      row = scratch;
    }
    for (int64_t t = 0; t < kc; ++t)
      panel[t * kPanelRows + r] = row[t];
  }
}

}  // namespace

void MatMulKernel(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                  const Tensor& out) {
  const int64_t n = x.rows();
  const int64_t k = x.cols();
  const int64_t m = w.dim(0);
  const auto* xd = x.data_as<const float>();
  auto* od = out.data_as<float>();
  const float* bd = bias == nullptr ? nullptr : bias->data_as<const float>();
  if (n == 0 || m == 0)
    return;
  const IsaKernels& isa = *ctx.isa;

  if (n <= kMaxStreamingRows || k == 0) {
    const auto* wd = static_cast<const uint8_t*>(w.data());
    ctx.ParallelFor(m, n * m * k, [&](int64_t begin, int64_t end) {
      isa.dot_rows(w.dtype(), xd, n, k, wd, w.row_bytes(), begin, end, od, m);
      if (bd != nullptr) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = begin; j < end; ++j)
            od[i * m + j] += bd[j];
        }
      }
    });
    return;
  }

  const int64_t num_panels = (m + kPanelRows - 1) / kPanelRows;
  ctx.ParallelFor(num_panels, n * m * k, [&](int64_t p_begin, int64_t p_end) {
    // Per-thread scratch, so that steady-state prefill allocates nothing.
    alignas(64) thread_local float panel[kPanelRows * kKBlock];
    thread_local float scratch[kKBlock];
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int64_t j0 = p * kPanelRows;
      const int64_t cols = std::min(kPanelRows, m - j0);
      for (int64_t t0 = 0; t0 < k; t0 += kKBlock) {
        const int64_t kc = std::min(kKBlock, k - t0);
        PackPanel(w, j0, cols, t0, kc, panel, scratch);
        for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) {
          const int64_t rows = std::min(kRowBlock, n - i0);
          isa.gemm_panel(xd + i0 * k + t0, k, rows, panel, kc, od + i0 * m + j0, m, cols, t0 != 0);
        }
      }
      if (bd != nullptr) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = j0; j < j0 + cols; ++j)
            od[i * m + j] += bd[j];
        }
      }
    }
  });
}

}  // namespace switchyard::runtime::cpu
