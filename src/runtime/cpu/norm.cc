#include <cmath>
#include <vector>

#include "runtime/cpu/internal/kernels.h"
#include "runtime/float16.h"

namespace switchyard::runtime::cpu {

void RmsNormKernel(const KernelContext& ctx, const Tensor& x, const Tensor& weight, float eps,
                   const Tensor& out) {
  const int64_t n = x.rows();
  const int64_t d = x.cols();
  const auto* xd = x.data_as<const float>();
  auto* od = out.data_as<float>();
  const float* w = weight.data_as<const float>();
  ctx.ParallelFor(n, 4 * n * d, [&](int64_t begin, int64_t end) {
    // A converted copy of a 16-bit weight, made once per call per thread.
    thread_local std::vector<float> converted;
    const float* wf = w;
    if (weight.dtype() != DType::kF32) {
      converted.resize(static_cast<size_t>(d));
      DequantizeRow(weight.dtype(), weight.data(), d, converted.data());
      wf = converted.data();
    }
    for (int64_t i = begin; i < end; ++i) {
      const float* xi = xd + i * d;
      const double sum_sq = ctx.isa->dot(xi, xi, d);
      const float inv_rms =
          static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps));
      float* oi = od + i * d;
      for (int64_t t = 0; t < d; ++t)
        oi[t] = xi[t] * inv_rms * wf[t];
    }
  });
}

}  // namespace switchyard::runtime::cpu
