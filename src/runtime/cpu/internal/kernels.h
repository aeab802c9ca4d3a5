// Drivers for the CPU backend's kernels: each validates nothing (CpuBackend does that
// first), splits the work over the pool, and calls the ISA's inner loops. Called only by
// the thread driving the backend.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "runtime/backend.h"
#include "runtime/cpu/internal/isa_kernels.h"
#include "runtime/tensor.h"

namespace switchyard::runtime::cpu {

// A weight packed at load (packed_weights.h): its panels of kPanelRows rows over all of k,
// panel_bytes each, one after the other.
struct PackedPanels {
  const uint8_t* panels;
  size_t panel_bytes;

  // Panel p: rows [p * kPanelRows, (p + 1) * kPanelRows).
  const uint8_t* panel(int64_t p) const { return panels + static_cast<size_t>(p) * panel_bytes; }
};

struct KernelContext {
  // Workers besides the driving thread, which takes part in every ParallelFor; null when
  // the backend runs on one thread.
  base::ThreadPool* pool;
  const IsaKernels* isa;
  // Int8 kernels for Q8_0 weights with quantized activations; null for the exact path
  // (Q8_0 weights dequantized, f32 activations).
  const Q8Kernels* q8;
  // Int8 kernels for GGML's Q4/Q5/K weights with quantized activations; null for the exact
  // path (weights dequantized, f32 activations). Set together with q8.
  const QuantKernels* quant;
  // bf16 dot-product kernels for BF16 weights with activations rounded to bf16; null for
  // the exact path (BF16 weights widened to f32, f32 activations).
  const Bf16Kernels* bf16;
  // Runs fn(begin, end) over [0, n) on the pool, or inline when work (a rough count of
  // scalar operations) is too small to be worth waking threads for.
  void ParallelFor(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn) const;
};

// x: F32, or BF16 rows (k even) for BF16 weights where ctx.bf16 is set, used as rounded.
// `path`: runtime::MatMulPath; kStreaming applies up to the dtype's streaming row limit,
// kPanel where the dtype has panel kernels; otherwise the row count decides. `packed`: w's
// copy packed at load (packed_weights.h), which every row count then reads instead.
void MatMulKernel(const KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias,
                  const Tensor& out, MatMulPath path, const std::optional<PackedPanels>& packed);
// One weight of MatMulsKernel, with MatMulKernel's w, bias, out and packed.
struct MatMulsTerm {
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;
  const Tensor* out = nullptr;
  std::optional<PackedPanels> packed;
};
// MatMulKernel(ctx, x, w, bias, out, kAuto, packed) for every term; where each of them
// streams GGML-quant weight rows (decode) or reads Q8_0 panels packed at load, x is quantized
// once per form and the terms' rows are split over the pool in one call.
void MatMulsKernel(const KernelContext& ctx, const Tensor& x, std::span<const MatMulsTerm> terms);
// Whether MatMulKernel's path changes the kernel for this weight dtype, n rows and k.
bool MatMulPathsDiffer(const KernelContext& ctx, DType w_dtype, int64_t n, int64_t k);
void EmbeddingKernel(const KernelContext& ctx, const Tensor& table, const int32_t* ids,
                     const Tensor& out);
void RmsNormKernel(const KernelContext& ctx, const Tensor& x, const Tensor& weight, float eps,
                   const Tensor& out);
// cos_v[j] and sin_v[j] of the angle position * inv_freq[j] (computed in double) for each
// pair j.
void RopeAngles(const std::vector<double>& inv_freq, double position, float* cos_v, float* sin_v);
// cos_sin: row p holds RopeAngles' cos then sin values for position p (rotary_dim floats),
// for every position in `positions`.
void RopeKernel(const KernelContext& ctx, const float* cos_sin, int64_t head_dim,
                int64_t rotary_dim, bool interleaved, const Tensor& x, const int32_t* positions);
void SwiGluKernel(const KernelContext& ctx, const Tensor& gate, const Tensor& up,
                  const Tensor& out);
// Gemma's elementwise ops (gemma_elementwise.cc).
void GeluTanhGluKernel(const KernelContext& ctx, const Tensor& gate, const Tensor& up,
                       const Tensor& out);
void ScaleKernel(const KernelContext& ctx, const Tensor& x, float factor, const Tensor& out);
void SoftCapKernel(const KernelContext& ctx, const Tensor& x, float cap, const Tensor& out);
// Mixture-of-experts routing and combining (moe.cc).
void MoeRouteKernel(const KernelContext& ctx, const Tensor& logits, int64_t top_k, bool normalize,
                    const Tensor& expert_ids, const Tensor& weights);
void MoeScatterAddKernel(const KernelContext& ctx, const Tensor& y, const int32_t* rows,
                         const float* weights, const Tensor& out);
void AddKernel(const KernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out);
void WriteKvKernel(const KernelContext& ctx, const Tensor& k, const Tensor& v,
                   const int32_t* slot_ids, const Tensor& k_pool, const Tensor& v_pool);
void PagedAttentionKernel(const KernelContext& ctx, const Tensor& q, const Tensor& k_pool,
                          const Tensor& v_pool, std::span<const AttentionSequence> sequences,
                          float scale, int64_t window, const Tensor& out);

}  // namespace switchyard::runtime::cpu
