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
      // As llama.cpp rounds it: f32 squares summed in double in order, the mean rounded to
      // f32, then 1 / sqrt in f32. The int8 activation quantization that follows turns a
      // last-bit difference here into a different rounding step, so matching it keeps greedy
      // decoding on llama.cpp's side of near ties.
      double sum_sq = 0.0;
      for (int64_t t = 0; t < d; ++t)
        sum_sq += static_cast<double>(xi[t] * xi[t]);
      const auto mean = static_cast<float>(sum_sq / static_cast<double>(d));
      const float inv_rms = 1.0f / std::sqrt(mean + eps);
      float* oi = od + i * d;
      for (int64_t t = 0; t < d; ++t)
        oi[t] = xi[t] * inv_rms * wf[t];
    }
  });
}

}  // namespace switchyard::runtime::cpu
