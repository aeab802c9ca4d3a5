#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {

void WriteKvKernel(const KernelContext& ctx, const Tensor& k, const Tensor& v,
                   const int32_t* slot_ids, const Tensor& k_pool, const Tensor& v_pool) {
  const int64_t n = k.dim(0);
  const int64_t row = k_pool.dim(2) * k_pool.dim(3);
  const size_t slot_bytes = RowBytes(k_pool.dtype(), row);
  const auto* kd = k.data_as<const float>();
  const auto* vd = v.data_as<const float>();
  auto* kp = static_cast<uint8_t*>(k_pool.data());
  auto* vp = static_cast<uint8_t*>(v_pool.data());
  ctx.ParallelFor(n, 2 * n * row, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (slot_ids[i] < 0)
        continue;
      const size_t offset = static_cast<size_t>(slot_ids[i]) * slot_bytes;
      ctx.isa->from_f32(k_pool.dtype(), kd + i * row, row, kp + offset);
      ctx.isa->from_f32(v_pool.dtype(), vd + i * row, row, vp + offset);
    }
  });
}

}  // namespace switchyard::runtime::cpu
