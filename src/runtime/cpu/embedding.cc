#include <cstring>

#include "runtime/cpu/internal/kernels.h"
#include "runtime/float16.h"

namespace switchyard::runtime::cpu {

void EmbeddingKernel(const KernelContext& ctx, const Tensor& table, const int32_t* ids,
                     const Tensor& out) {
  const int64_t n = out.rows();
  const int64_t d = out.cols();
  const auto* base = static_cast<const uint8_t*>(table.data());
  const size_t row_bytes = table.row_bytes();
  auto* od = out.data_as<float>();
  ctx.ParallelFor(n, n * d, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      DequantizeRow(table.dtype(), base + static_cast<size_t>(ids[i]) * row_bytes, d, od + i * d);
    }
  });
}

}  // namespace switchyard::runtime::cpu
