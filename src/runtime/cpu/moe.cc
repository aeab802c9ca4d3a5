// Mixture-of-experts routing (softmax + top-k per token) and the weighted scatter that
// sums each token's expert outputs back. The expert FFNs themselves are ordinary MatMuls
// over the rows gathered per expert (model/moe_ffn.cc); these two kernels are the parts
// around them. Both are a few flops per token next to the expert GEMMs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {

void MoeRouteKernel(const KernelContext& ctx, const Tensor& logits, int64_t top_k, bool normalize,
                    const Tensor& expert_ids, const Tensor& weights) {
  const int64_t n = logits.rows();
  const int64_t num_experts = logits.cols();
  const auto* in = logits.data_as<const float>();
  auto* ids = expert_ids.data_as<int32_t>();
  auto* w = weights.data_as<float>();
  ctx.ParallelFor(n, 16 * n * num_experts, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> probs;
    probs.resize(static_cast<size_t>(num_experts));
    for (int64_t i = begin; i < end; ++i) {
      const float* row = in + i * num_experts;
      float max = row[0];
      for (int64_t e = 1; e < num_experts; ++e)
        max = std::max(max, row[e]);
      float sum = 0.0f;
      for (int64_t e = 0; e < num_experts; ++e) {
        probs[static_cast<size_t>(e)] = std::exp(row[e] - max);
        sum += probs[static_cast<size_t>(e)];
      }
      for (float& p : probs)
        p /= sum;
      // top_k is small (2-8): repeated selection, marking each pick with -1 (p >= 0).
      float picked_sum = 0.0f;
      for (int64_t k = 0; k < top_k; ++k) {
        int64_t best = 0;
        for (int64_t e = 1; e < num_experts; ++e) {
          if (probs[static_cast<size_t>(e)] > probs[static_cast<size_t>(best)])
            best = e;
        }
        ids[i * top_k + k] = static_cast<int32_t>(best);
        w[i * top_k + k] = probs[static_cast<size_t>(best)];
        picked_sum += probs[static_cast<size_t>(best)];
        probs[static_cast<size_t>(best)] = -1.0f;
      }
      if (normalize) {
        for (int64_t k = 0; k < top_k; ++k)
          w[i * top_k + k] /= picked_sum;
      }
    }
  });
}

void MoeScatterAddKernel(const KernelContext& ctx, const Tensor& y, const int32_t* rows,
                         const float* weights, const Tensor& out) {
  const int64_t m = y.rows();
  const int64_t d = y.cols();
  const auto* yd = y.data_as<const float>();
  auto* od = out.data_as<float>();
  std::memset(od, 0, out.size_bytes());
  // Threads split the columns, so every output element sees its terms in increasing j.
  ctx.ParallelFor(d, 2 * m * d, [&](int64_t begin, int64_t end) {
    for (int64_t j = 0; j < m; ++j) {
      const float* yj = yd + j * d;
      float* oi = od + static_cast<int64_t>(rows[j]) * d;
      for (int64_t c = begin; c < end; ++c)
        oi[c] += yj[c] * weights[j];
    }
  });
}

}  // namespace switchyard::runtime::cpu
