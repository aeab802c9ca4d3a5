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
      // As llama.cpp rounds it: f32 squares summed in double, the mean rounded to f32, then
      // 1 / sqrt in f32. The int8 activation quantization that follows turns a last-bit
      // difference here into a different rounding step, so matching it keeps greedy
      // decoding on llama.cpp's side of near ties. llama.cpp sums in order; here 8 partial
      // sums run side by side (one chain of d dependent adds was ~3% of a prefill), which
      // moves the double sum by an ulp or so: below the f32 mean's rounding step but for
      // about one row in a million.
      constexpr int kLanes = 8;
      double lanes[kLanes] = {};
      int64_t t = 0;
      for (; t + kLanes <= d; t += kLanes) {
        for (int j = 0; j < kLanes; ++j)
          lanes[j] += static_cast<double>(xi[t + j] * xi[t + j]);
      }
      double sum_sq = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                      ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      for (; t < d; ++t)
        sum_sq += static_cast<double>(xi[t] * xi[t]);
      const auto mean = static_cast<float>(sum_sq / static_cast<double>(d));
      const float inv_rms = 1.0f / std::sqrt(mean + eps);
      float* oi = od + i * d;
      // Blocks read whole before they are written, so that the compiler keeps them in
      // vector registers although out may alias x.
      t = 0;
      for (; t + kLanes <= d; t += kLanes) {
        float block[kLanes];
        for (int j = 0; j < kLanes; ++j)
          block[j] = xi[t + j] * inv_rms * wf[t + j];
        for (int j = 0; j < kLanes; ++j)
          oi[t + j] = block[j];
      }
      for (; t < d; ++t)
        oi[t] = xi[t] * inv_rms * wf[t];
    }
  });
}

}  // namespace switchyard::runtime::cpu
