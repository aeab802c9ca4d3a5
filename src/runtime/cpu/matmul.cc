// MatMul driver. Few activation rows (decode) are memory-bound: each thread streams its
// share of the weight rows once, converting on the fly (dot_rows). Many rows (prefill) are
// compute-bound: weights are packed into panels of kPanelRows rows x one k block (small
// enough for L1/L2) and every activation row is multiplied against a panel while it is hot
// (gemm_panel), so conversion cost is paid once per panel, not per row.
//
// Q8_0 weights with ctx.q8 set take the int8 route instead: activation rows are quantized
// to Q8_0-like blocks once per call, then the same two shapes run on int8 dot products
// (the panel shape only where ctx.q8 has one; else many rows take the f32 panels).
// GGML's Q4/Q5/K weights with ctx.quant set likewise, on their own int8 kernels (weights
// decoded to unsigned bytes with a scale and a min per 16 elements; see quant_decode.h),
// which few rows (decode) unpack straight into registers instead (quant_gemv.h).
// Likewise BF16 weights with ctx.bf16 set: activation rows are rounded to bf16 once (or come
// rounded, as BF16 rows), then both shapes run on bf16 pair dot products.
// BF16 and Q8_0 weights packed at load (packed_weights.h) take their panel kernel at every
// row count, with no packing per call.
//
// Where both shapes apply (few rows, and panels for the dtype), the caller's MatMulPath
// picks one; a compiled step measures both per shape (compile/matmul_tuning.h).
// MatMulsKernel takes several weights against one x (a layer's q, k and v): where each
// streams GGML-quant rows or reads packed Q8_0 panels, x is quantized once and all the
// terms' rows go to the pool in one call, which a decode step otherwise waits on per weight.
#include <algorithm>
#include <optional>
#include <vector>

#include "runtime/cpu/internal/kernels.h"
#include "runtime/cpu/internal/quant_gemv.h"
#include "runtime/cpu/internal/scratch.h"

namespace switchyard::runtime::cpu {
namespace {

// Columns of k per packed f32 panel: 32 rows x 256 f32 = 32 KiB.
constexpr int64_t kKBlock = 256;
static_assert(kKBlock <= kMaxPackColumns);
// Q8_0 blocks per pass over an int8 panel: 16 x 1,152 bytes.
constexpr int64_t kQ8KBlocks = 16;
// Columns of k per packed bf16 panel: 32 rows x 512 bf16 = 32 KiB, as for f32.
constexpr int64_t kBf16KBlock = 512;
static_assert(kBf16KBlock <= kMaxPackColumns && kBf16KBlock % 2 == 0);
// Columns of k per pass over a bf16 panel packed at load. The kernel reads two panel
// vectors per 24 dot products, which L2 serves as well as L1, so a pass can be longer than
// L1 holds (32 rows x 2,048 bf16 = 128 KiB): fewer passes, fewer read-modify-writes of
// the output.
constexpr int64_t kBf16PackedKBlock = 2048;
// Groups of 256 elements per packed GGML-quant panel: 32 rows x 512 bytes (+ scales).
constexpr int64_t kQuantKGroups = 2;
// Activation rows per pass over a panel, so the activation block stays in L2.
constexpr int64_t kRowBlock = 256;

// The step that splits `units` into the fewest passes of at most max_step, as even as a
// multiple of `multiple` allows (576 in passes of 512: 288 + 288, not 512 + 64, whose
// short pass costs as much output traffic as a long one). REQUIRES: max_step % multiple == 0.
int64_t EvenStep(int64_t units, int64_t max_step, int64_t multiple) {
  const int64_t passes = std::max<int64_t>(1, (units + max_step - 1) / max_step);
  const int64_t step = (units + passes - 1) / passes;
  return (step + multiple - 1) / multiple * multiple;
}

void AddBias(const float* bias, int64_t n, int64_t m, int64_t j_begin, int64_t j_end, float* out) {
  if (bias == nullptr)
    return;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = j_begin; j < j_end; ++j)
      out[i * m + j] += bias[j];
  }
}

// Whether a MatMul of n activation rows streams the weights rather than packing panels:
// `path` decides where both shapes are there (has_panels, and n within the streaming
// limit), else the row count.
bool Streams(MatMulPath path, int64_t n, int64_t max_streaming_rows, bool has_panels) {
  if (!has_panels)
    return true;
  if (n > max_streaming_rows)
    return false;
  return path != MatMulPath::kPanel;
}

// The panel shape's loop, the same for every dtype: panels of kPanelRows weight rows split
// over the pool; each panel's k in steps of `step` of its `units` (columns, blocks or
// groups); per step, panel_at(p, cols, u0, nu) gives panel p's units [u0, u0 + nu) (from a
// copy packed at load, or packed there into per-thread scratch), and multiply(panel, i0,
// rows, u0, nu, out, cols, accumulate) adds activation rows [i0, i0 + rows) times it into
// out (row i0, column p * kPanelRows), kRowBlock rows at a time, so that the panel is
// read from memory once and from L1 for the other row blocks.
template <typename PanelAt, typename Multiply>
void RunPanels(int64_t p_begin, int64_t p_end, int64_t n, int64_t m, int64_t units, int64_t step,
               const float* bd, float* od, const PanelAt& panel_at, const Multiply& multiply) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int64_t j0 = p * kPanelRows;
    const int64_t cols = std::min(kPanelRows, m - j0);
    for (int64_t u0 = 0; u0 < units; u0 += step) {
      const int64_t nu = std::min(step, units - u0);
      const auto& panel = panel_at(p, cols, u0, nu);
      for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) {
        multiply(panel, i0, std::min(kRowBlock, n - i0), u0, nu, od + i0 * m + j0, cols, u0 != 0);
      }
    }
    AddBias(bd, n, m, j0, j0 + cols, od);
  }
}

template <typename PanelAt, typename Multiply>
void PanelLoop(const KernelContext& ctx, int64_t n, int64_t m, int64_t k, int64_t units,
               int64_t step, const float* bd, float* od, const PanelAt& panel_at,
               const Multiply& multiply) {
  ctx.ParallelFor(NumPanels(m), n * m * k, [&](int64_t p_begin, int64_t p_end) {
    RunPanels(p_begin, p_end, n, m, units, step, bd, od, panel_at, multiply);
  });
}

// Activation rows quantized for the Q8_0 kernels: q8.quantize's int8 values and per-block
// scales, row i at q + i * k and s + i * blocks.
struct Q8Activations {
  const uint8_t* q;
  const float* s;
  int64_t blocks;
};

// x's rows as Q8Activations, into per-thread buffers that grow once.
Q8Activations QuantizeQ8Activations(const KernelContext& ctx, const float* xd, int64_t n,
                                    int64_t k) {
  const int64_t blocks = k / kQ8_0BlockElems;
  thread_local std::vector<uint8_t> q_storage;
  thread_local std::vector<float> s_storage;
  uint8_t* q = Grow(q_storage, static_cast<size_t>(n * k));
  float* s = Grow(s_storage, static_cast<size_t>(n * blocks));
  ctx.ParallelFor(n, n * k * 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      ctx.q8->quantize(xd + i * k, k, q + i * k, s + i * blocks);
  });
  return {q, s, blocks};
}

// PanelLoop's multiply for Q8_0 panels against x, for an output of m columns.
auto Q8PanelMultiply(const Q8Kernels& q8, const Q8Activations& x, int64_t k, int64_t m) {
  return [&q8, x, k, m](const uint8_t* panel, int64_t i0, int64_t rows, int64_t b0, int64_t nb,
                        float* out, int64_t cols, bool accumulate) {
    q8.gemm_panel(x.q + i0 * k + b0 * kQ8_0BlockElems, k, x.s + i0 * x.blocks + b0, x.blocks, rows,
                  panel, nb, out, m, cols, accumulate);
  };
}

// Panels [p_begin, p_end) of out = x * w^T (+ bias) from w's copy packed at load.
void RunPackedQ8Panels(const Q8Kernels& q8, const Q8Activations& x, int64_t n, int64_t k,
                       const PackedPanels& packed, const float* bd, int64_t m, float* od,
                       int64_t p_begin, int64_t p_end) {
  RunPanels(
      p_begin, p_end, n, m, x.blocks, kQ8KBlocks, bd, od,
      [&packed](int64_t p, int64_t, int64_t b0, int64_t) {
        return packed.panel(p) + b0 * kQ8PanelStride;
      },
      Q8PanelMultiply(q8, x, k, m));
}

void QuantizedMatMul(const KernelContext& ctx, const float* xd, int64_t n, int64_t k,
                     const Tensor& w, const float* bd, int64_t m, float* od, MatMulPath path,
                     const std::optional<PackedPanels>& packed) {
  const Q8Kernels& q8 = *ctx.q8;
  const Q8Activations x = QuantizeQ8Activations(ctx, xd, n, k);
  const int64_t blocks = x.blocks;
  if (packed.has_value()) {
    ctx.ParallelFor(NumPanels(m), n * m * k, [&](int64_t p_begin, int64_t p_end) {
      RunPackedQ8Panels(q8, x, n, k, *packed, bd, m, od, p_begin, p_end);
    });
    return;
  }
  const auto* wd = static_cast<const uint8_t*>(w.data());
  const size_t w_row_bytes = w.row_bytes();

  if (Streams(path, n, q8.max_streaming_rows, q8.gemm_panel != nullptr)) {
    // dot_rows wants each block's scale spread over 8 lanes.
    const int64_t stride = (blocks + 1) / 2 * 16;
    thread_local std::vector<float> spread_storage;
    float* spread = Grow(spread_storage, static_cast<size_t>(n * stride));
    for (int64_t i = 0; i < n; ++i) {
      float* s = spread + i * stride;
      std::fill(s, s + stride, 0.0f);
      for (int64_t b = 0; b < blocks; ++b)
        std::fill(s + 8 * b, s + 8 * b + 8, x.s[i * blocks + b]);
    }
    ctx.ParallelFor(m, n * m * k, [&](int64_t begin, int64_t end) {
      q8.dot_rows(x.q, spread, n, k, wd, w_row_bytes, begin, end, od, m);
      AddBias(bd, n, m, begin, end, od);
    });
    return;
  }

  PanelLoop(
      ctx, n, m, k, blocks, kQ8KBlocks, bd, od,
      [&](int64_t p, int64_t cols, int64_t b0, int64_t nb) {
        // Per-thread scratch, so that steady-state calls allocate nothing.
        alignas(64) thread_local uint8_t panel[kQ8KBlocks * kQ8PanelStride];
        q8.pack_panel(wd, w_row_bytes, p * kPanelRows, cols, b0, nb, panel);
        return static_cast<const uint8_t*>(panel);
      },
      Q8PanelMultiply(q8, x, k, m));
}

// Rows of x in QuantActivations form (see isa_kernels.h), into per-thread buffers that
// grow once.
QuantActivations QuantizeActivations(const KernelContext& ctx, const float* xd, int64_t n,
                                     int64_t k) {
  const int64_t ldq = (k + kGroupElems - 1) / kGroupElems * kGroupElems;
  thread_local std::vector<int8_t> q_storage;
  thread_local std::vector<float> s_storage;
  thread_local std::vector<float> m_storage;
  int8_t* q = Grow(q_storage, static_cast<size_t>(n * ldq));
  float* s = Grow(s_storage, static_cast<size_t>(n * ldq / 4));
  float* m = Grow(m_storage, static_cast<size_t>(n * ldq / 16));
  ctx.ParallelFor(n, n * k * 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      ctx.quant->quantize(xd + i * k, k, ldq, q + i * ldq, s + i * ldq / 4, m + i * ldq / 16);
  });
  return {q, s, m, ldq};
}

// Whether a MatMul of n rows on the GGML-quant route streams its weight rows.
bool StreamsGgmlQuant(const KernelContext& ctx, int64_t n, MatMulPath path) {
  return Streams(path, n, ctx.quant->max_streaming_rows, ctx.quant->gemm_panel != nullptr);
}

// Output columns [begin, end) of out = x * w^T (+ bias) from w's rows streamed once
// (n <= the route's streaming row limit). od: out's data, [n, w.dim(0)].
void StreamGgmlQuantRows(const QuantKernels& quant, const QuantActivations& x, int64_t n, int64_t k,
                         const Tensor& w, const float* bd, float* od, int64_t begin, int64_t end) {
  const DType dtype = w.dtype();
  const int64_t m = w.dim(0);
  const auto dot_rows =
      n <= quant.max_gemv_rows && HasDirectGemv(dtype) ? quant.gemv : quant.dot_rows;
  dot_rows(dtype, x, n, k, static_cast<const uint8_t*>(w.data()), w.row_bytes(), begin, end, od, m);
  AddBias(bd, n, m, begin, end, od);
}

void GgmlQuantMatMul(const KernelContext& ctx, const float* xd, int64_t n, int64_t k,
                     const Tensor& w, const float* bd, int64_t m, float* od, MatMulPath path) {
  const QuantKernels& quant = *ctx.quant;
  const QuantActivations x = QuantizeActivations(ctx, xd, n, k);
  const auto* wd = static_cast<const uint8_t*>(w.data());
  const size_t w_row_bytes = w.row_bytes();
  const DType dtype = w.dtype();

  if (StreamsGgmlQuant(ctx, n, path)) {
    ctx.ParallelFor(m, n * m * k, [&](int64_t begin, int64_t end) {
      StreamGgmlQuantRows(quant, x, n, k, w, bd, od, begin, end);
    });
    return;
  }

  const int64_t chunks = k / kChunkElems;
  const int64_t groups = (chunks + kGroupChunks - 1) / kGroupChunks;
  const bool split_halves = dtype == DType::kQ6_K || dtype == DType::kQ2_K || dtype == DType::kQ3_K;
  constexpr int64_t kPanelChunks = kQuantKGroups * kGroupChunks;
  // Chunks in the groups from g0 (the last group may be short).
  const auto chunks_from = [&](int64_t g0) {
    return std::min(kPanelChunks, chunks - g0 * kGroupChunks);
  };
  PanelLoop(
      ctx, n, m, k, groups, kQuantKGroups, bd, od,
      [&](int64_t p, int64_t cols, int64_t g0, int64_t ng) {
        alignas(64) thread_local uint8_t q[kPanelChunks * kQ8PanelBlockBytes];
        alignas(64) thread_local float scales[kPanelChunks * 2 * kPanelRows];
        alignas(64) thread_local float mins[kPanelChunks * 2 * kPanelRows];
        QuantPanel panel{q, scales, mins};
        quant.pack_panel(dtype, wd, w_row_bytes, p * kPanelRows, cols, g0, ng, chunks_from(g0),
                         &panel);
        return panel;
      },
      [&](const QuantPanel& panel, int64_t i0, int64_t rows, int64_t g0, int64_t, float* out,
          int64_t cols, bool accumulate) {
        const QuantActivations xi{x.q + i0 * x.ldq, x.s + i0 * x.ldq / 4, x.m + i0 * x.ldq / 16,
                                  x.ldq};
        quant.gemm_panel(xi, g0 * kGroupChunks, rows, panel, chunks_from(g0), split_halves, out, m,
                         cols, accumulate);
      });
}

// x: F32 rows, rounded here, or BF16 rows rounded by the caller (k even).
void Bf16MatMul(const KernelContext& ctx, const Tensor& x, int64_t n, int64_t k, const Tensor& w,
                const float* bd, int64_t m, float* od, MatMulPath path,
                const std::optional<PackedPanels>& packed) {
  const Bf16Kernels& bf16 = *ctx.bf16;
  // Even stride, so that every row's pairs start on a pair boundary.
  const int64_t ldx = (k + 1) / 2 * 2;
  const uint16_t* xb = nullptr;
  if (x.dtype() == DType::kBF16) {
    xb = x.data_as<const uint16_t>();
  } else {
    thread_local std::vector<uint16_t> xb_storage;
    uint16_t* rounded = Grow(xb_storage, static_cast<size_t>(n * ldx));
    const auto* xd = x.data_as<const float>();
    ctx.ParallelFor(n, n * k * 2, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        bf16.round_row(xd + i * k, k, rounded + i * ldx);
    });
    xb = rounded;
  }
  const auto multiply = [&](const uint32_t* panel, int64_t i0, int64_t rows, int64_t t0, int64_t kc,
                            float* out, int64_t cols, bool accumulate) {
    bf16.gemm_panel(xb + i0 * ldx + t0, ldx, rows, panel, (kc + 1) / 2, out, m, cols, accumulate);
  };
  if (packed.has_value()) {
    PanelLoop(
        ctx, n, m, k, k, EvenStep(k, kBf16PackedKBlock, 2), bd, od,
        [&packed](int64_t p, int64_t, int64_t t0, int64_t) {
          return reinterpret_cast<const uint32_t*>(packed->panel(p)) + t0 / 2 * kPanelRows;
        },
        multiply);
    return;
  }
  const auto* wd = static_cast<const uint8_t*>(w.data());
  const size_t w_row_bytes = w.row_bytes();

  if (Streams(path, n, bf16.max_streaming_rows, true)) {
    ctx.ParallelFor(m, n * m * k, [&](int64_t begin, int64_t end) {
      bf16.dot_rows(xb, ldx, n, k, wd, w_row_bytes, begin, end, od, m);
      AddBias(bd, n, m, begin, end, od);
    });
    return;
  }

  PanelLoop(
      ctx, n, m, k, k, EvenStep(k, kBf16KBlock, 2), bd, od,
      [&](int64_t p, int64_t cols, int64_t t0, int64_t kc) {
        alignas(64) thread_local uint32_t panel[kPanelRows * kBf16KBlock / 2];
        bf16.pack_panel(wd + static_cast<size_t>(p * kPanelRows) * w_row_bytes, w_row_bytes, cols,
                        t0, kc, panel);
        return static_cast<const uint32_t*>(panel);
      },
      multiply);
}

// The int8 and bf16 routes MatMulKernel takes (each needs its table in ctx); with none,
// the f32 kernels of ctx.isa run.
bool TakesQ8Route(const KernelContext& ctx, DType w_dtype, int64_t n, int64_t k) {
  return w_dtype == DType::kQ8_0 && ctx.q8 != nullptr && k > 0 &&
         (n <= ctx.q8->max_streaming_rows || ctx.q8->gemm_panel != nullptr);
}

bool TakesGgmlQuantRoute(const KernelContext& ctx, DType w_dtype, int64_t n, int64_t k) {
  return IsGgmlQuantDType(w_dtype) && ctx.quant != nullptr && k > 0 &&
         (n <= ctx.quant->max_streaming_rows || ctx.quant->gemm_panel != nullptr);
}

bool TakesBf16Route(const KernelContext& ctx, DType w_dtype, int64_t k) {
  return w_dtype == DType::kBF16 && ctx.bf16 != nullptr && k > 0;
}

}  // namespace

bool MatMulPathsDiffer(const KernelContext& ctx, DType w_dtype, int64_t n, int64_t k) {
  if (n == 0 || k == 0)
    return false;
  // Whether Streams() answers differently for the two paths on the route taken.
  const auto differ = [n](int64_t max_streaming_rows, bool has_panels) {
    return Streams(MatMulPath::kStreaming, n, max_streaming_rows, has_panels) !=
           Streams(MatMulPath::kPanel, n, max_streaming_rows, has_panels);
  };
  if (TakesQ8Route(ctx, w_dtype, n, k))
    return differ(ctx.q8->max_streaming_rows, ctx.q8->gemm_panel != nullptr);
  if (TakesGgmlQuantRoute(ctx, w_dtype, n, k))
    return differ(ctx.quant->max_streaming_rows, ctx.quant->gemm_panel != nullptr);
  if (TakesBf16Route(ctx, w_dtype, k))
    return differ(ctx.bf16->max_streaming_rows, true);
  return differ(ctx.isa->max_streaming_rows, true);
}

void MatMulKernel(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                  const Tensor& out, MatMulPath path, const std::optional<PackedPanels>& packed) {
  const int64_t n = x.rows();
  const int64_t k = x.cols();
  const int64_t m = w.dim(0);
  auto* od = out.data_as<float>();
  const float* bd = bias == nullptr ? nullptr : bias->data_as<const float>();
  if (n == 0 || m == 0)
    return;
  if (TakesBf16Route(ctx, w.dtype(), k)) {
    Bf16MatMul(ctx, x, n, k, w, bd, m, od, path, packed);
    return;
  }
  const auto* xd = x.data_as<const float>();
  const IsaKernels& isa = *ctx.isa;

  if (TakesQ8Route(ctx, w.dtype(), n, k)) {
    QuantizedMatMul(ctx, xd, n, k, w, bd, m, od, path, packed);
    return;
  }
  if (TakesGgmlQuantRoute(ctx, w.dtype(), n, k)) {
    GgmlQuantMatMul(ctx, xd, n, k, w, bd, m, od, path);
    return;
  }

  const auto* wd = static_cast<const uint8_t*>(w.data());
  const size_t w_row_bytes = w.row_bytes();
  if (k == 0 || Streams(path, n, isa.max_streaming_rows, true)) {
    ctx.ParallelFor(m, n * m * k, [&](int64_t begin, int64_t end) {
      isa.dot_rows(w.dtype(), xd, n, k, wd, w_row_bytes, begin, end, od, m);
      AddBias(bd, n, m, begin, end, od);
    });
    return;
  }

  PanelLoop(
      ctx, n, m, k, k, kKBlock, bd, od,
      [&](int64_t p, int64_t cols, int64_t t0, int64_t kc) {
        // Per-thread scratch, so that steady-state prefill allocates nothing.
        alignas(64) thread_local float panel[kPanelRows * kKBlock];
        isa.pack_panel(w.dtype(), wd + static_cast<size_t>(p * kPanelRows) * w_row_bytes,
                       w_row_bytes, cols, t0, kc, panel);
        return static_cast<const float*>(panel);
      },
      [&](const float* panel, int64_t i0, int64_t rows, int64_t t0, int64_t kc, float* out,
          int64_t cols, bool accumulate) {
        isa.gemm_panel(xd + i0 * k + t0, k, rows, panel, kc, out, m, cols, accumulate);
      });
}

void MatMulsKernel(const KernelContext& ctx, const Tensor& x, std::span<const MatMulsTerm> terms) {
  const int64_t n = x.rows();
  const int64_t k = x.cols();
  // How a term runs within one pool call: streaming GGML-quant rows, or Q8_0 panels packed at
  // load (which every row count takes); kAlone: as a MatMul of its own.
  enum class Shape : uint8_t { kGgmlQuantRows, kPackedQ8Panels, kAlone };
  const bool quantizes_x = n > 0 && x.dtype() == DType::kF32;
  const auto shape_of = [&](const MatMulsTerm& t) {
    if (!quantizes_x)
      return Shape::kAlone;
    if (t.packed.has_value())
      return TakesQ8Route(ctx, t.w->dtype(), n, k) ? Shape::kPackedQ8Panels : Shape::kAlone;
    return TakesGgmlQuantRoute(ctx, t.w->dtype(), n, k) &&
                   StreamsGgmlQuant(ctx, n, MatMulPath::kAuto)
               ? Shape::kGgmlQuantRows
               : Shape::kAlone;
  };
  bool any_rows = false;
  bool any_panels = false;
  int64_t rows = 0;
  for (const MatMulsTerm& t : terms) {
    const Shape shape = shape_of(t);
    if (shape == Shape::kAlone) {
      for (const MatMulsTerm& u : terms)
        MatMulKernel(ctx, x, *u.w, u.bias, *u.out, MatMulPath::kAuto, u.packed);
      return;
    }
    any_rows |= shape == Shape::kGgmlQuantRows;
    any_panels |= shape == Shape::kPackedQ8Panels;
    rows += t.w->dim(0);
  }
  // Quantize x once per form, and split the terms' rows, laid end to end, over the pool in
  // one call; a panel of kPanelRows rows goes with the chunk that holds its first row.
  const auto* xd = x.data_as<const float>();
  const QuantActivations xq = any_rows ? QuantizeActivations(ctx, xd, n, k) : QuantActivations{};
  const Q8Activations x8 = any_panels ? QuantizeQ8Activations(ctx, xd, n, k) : Q8Activations{};
  ctx.ParallelFor(rows, n * rows * k, [&](int64_t begin, int64_t end) {
    int64_t first = 0;  // the term's first row in the joined range
    for (const MatMulsTerm& t : terms) {
      const int64_t m = t.w->dim(0);
      const int64_t lo = std::max(begin, first) - first;
      const int64_t hi = std::min(end, first + m) - first;
      first += m;
      if (lo >= hi)
        continue;
      const float* bd = t.bias == nullptr ? nullptr : t.bias->data_as<const float>();
      auto* od = t.out->data_as<float>();
      if (t.packed.has_value()) {
        RunPackedQ8Panels(*ctx.q8, x8, n, k, *t.packed, bd, m, od, NumPanels(lo), NumPanels(hi));
      } else {
        StreamGgmlQuantRows(*ctx.quant, xq, n, k, *t.w, bd, od, lo, hi);
      }
    }
  });
}

}  // namespace switchyard::runtime::cpu
