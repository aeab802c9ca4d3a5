// Elementwise ops that Gemma needs and the Llama family does not: the GeGLU activation,
// the embedding scale and logit soft-capping. Scalar loops in f32, written the way PyTorch
// evaluates them (same operation order), so f32 runs stay within an ulp or two of
// transformers; they are a few passes over activations per layer, never the bottleneck.
#include <cmath>
#include <numbers>

#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {

void GeluTanhGluKernel(const KernelContext& ctx, const Tensor& gate, const Tensor& up,
                       const Tensor& out) {
  const int64_t count = gate.num_elements();
  const auto* g = gate.data_as<const float>();
  const auto* u = up.data_as<const float>();
  auto* o = out.data_as<float>();
  // PyTorch's GeluKernel (approximate="tanh"): kBeta = sqrt(2) * 2/sqrt(pi) * 0.5.
  constexpr auto kBeta =
      static_cast<float>(std::numbers::sqrt2 * 2 * std::numbers::inv_sqrtpi * 0.5);
  constexpr float kKappa = 0.044715f;
  ctx.ParallelFor(count, 16 * count, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float x = g[t];
      const float inner = kBeta * (x + kKappa * (x * x * x));
      o[t] = 0.5f * x * (1.0f + std::tanh(inner)) * u[t];
    }
  });
}

void ScaleKernel(const KernelContext& ctx, const Tensor& x, float factor, const Tensor& out) {
  const int64_t count = x.num_elements();
  const auto* xd = x.data_as<const float>();
  auto* o = out.data_as<float>();
  ctx.ParallelFor(count, count, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      o[t] = xd[t] * factor;
  });
}

void SoftCapKernel(const KernelContext& ctx, const Tensor& x, float cap, const Tensor& out) {
  const int64_t count = x.num_elements();
  const auto* xd = x.data_as<const float>();
  auto* o = out.data_as<float>();
  ctx.ParallelFor(count, 16 * count, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      o[t] = std::tanh(xd[t] / cap) * cap;
  });
}

}  // namespace switchyard::runtime::cpu
