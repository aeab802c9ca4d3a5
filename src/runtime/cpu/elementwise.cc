#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {

void SwiGluKernel(const KernelContext& ctx, const Tensor& gate, const Tensor& up,
                  const Tensor& out) {
  const int64_t count = gate.num_elements();
  const auto* g = gate.data_as<const float>();
  const auto* u = up.data_as<const float>();
  auto* o = out.data_as<float>();
  ctx.ParallelFor(count, 8 * count, [&](int64_t begin, int64_t end) {
    ctx.isa->swiglu(g + begin, u + begin, end - begin, o + begin);
  });
}

void AddKernel(const KernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t count = a.num_elements();
  const auto* ad = a.data_as<const float>();
  const auto* bd = b.data_as<const float>();
  auto* o = out.data_as<float>();
  ctx.ParallelFor(count, count, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      o[t] = ad[t] + bd[t];
  });
}

}  // namespace switchyard::runtime::cpu
