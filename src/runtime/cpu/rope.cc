#include <cmath>
#include <vector>

#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {

void RopeAngles(const std::vector<double>& inv_freq, double position, float* cos_v, float* sin_v) {
  for (size_t j = 0; j < inv_freq.size(); ++j) {
    const double angle = position * inv_freq[j];
    cos_v[j] = static_cast<float>(std::cos(angle));
    sin_v[j] = static_cast<float>(std::sin(angle));
  }
}

void RopeKernel(const KernelContext& ctx, const float* cos_sin, int64_t head_dim,
                int64_t rotary_dim, bool interleaved, const Tensor& x, const int32_t* positions) {
  const int64_t n = x.dim(0);
  if (n == 0)
    return;
  const int64_t heads = x.num_elements() / (n * head_dim);
  const int64_t half = rotary_dim / 2;
  auto* xd = x.data_as<float>();
  // Pair j is (lo, hi): (j, j + half) in NeoX layout, (2j, 2j + 1) interleaved.
  const int64_t stride = interleaved ? 2 : 1;
  const int64_t offset = interleaved ? 1 : half;
  ctx.ParallelFor(n, n * heads * rotary_dim * 2, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* cos_v = cos_sin + static_cast<int64_t>(positions[i]) * 2 * half;
      const float* sin_v = cos_v + half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = xd + (i * heads + h) * head_dim;
        for (int64_t j = 0; j < half; ++j) {
          float* lo = v + j * stride;
          float* hi = lo + offset;
          const float a = *lo;
          const float b = *hi;
          *lo = a * cos_v[j] - b * sin_v[j];
          *hi = b * cos_v[j] + a * sin_v[j];
        }
      }
    }
  });
}

}  // namespace switchyard::runtime::cpu
