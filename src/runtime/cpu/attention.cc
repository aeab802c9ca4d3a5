// Paged attention. Work items are (kv head, query row) pairs, kv-head major so that each
// thread gets whole heads and the causal triangle's cost spreads evenly. An item serves
// all query heads that share its kv head (GQA), so each K/V row is read once per group.
// Softmax is online, one KV block at a time: scores of the block, then a running max and
// rescaled accumulators, in f32.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {
namespace {

struct RowRef {
  int32_t sequence;
  int32_t row_in_sequence;
};

// K or V row at `slot` of the pool as f32: a pointer into an F32 pool, or converted into
// `scratch` for 16-bit pools.
const float* PoolRow(const IsaKernels& isa, const Tensor& pool, const uint8_t* base,
                     size_t slot_bytes, int64_t slot, int64_t kv_head, int64_t head_dim,
                     float* scratch) {
  const uint8_t* p =
      base + static_cast<size_t>(slot) * slot_bytes + RowBytes(pool.dtype(), kv_head * head_dim);
  if (pool.dtype() == DType::kF32)
    return reinterpret_cast<const float*>(p);
  isa.to_f32(pool.dtype(), p, head_dim, scratch);
  return scratch;
}

}  // namespace

void PagedAttentionKernel(const KernelContext& ctx, const Tensor& q, const Tensor& k_pool,
                          const Tensor& v_pool, std::span<const AttentionSequence> sequences,
                          float scale, const Tensor& out) {
  const int64_t heads = q.dim(1);
  const int64_t head_dim = q.dim(2);
  const int64_t block_size = k_pool.dim(1);
  const int64_t kv_heads = k_pool.dim(2);
  const int64_t group = heads / kv_heads;
  const size_t slot_bytes = RowBytes(k_pool.dtype(), kv_heads * head_dim);
  const auto* kbase = static_cast<const uint8_t*>(k_pool.data());
  const auto* vbase = static_cast<const uint8_t*>(v_pool.data());
  const auto* qd = q.data_as<const float>();
  auto* od = out.data_as<float>();
  const IsaKernels& isa = *ctx.isa;

  // Grows once per backend thread; reused by every later call.
  thread_local std::vector<RowRef> rows;
  rows.clear();
  int64_t work = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    for (int64_t i = 0; i < sequences[s].q_len; ++i) {
      rows.push_back({static_cast<int32_t>(s), static_cast<int32_t>(i)});
    }
    work += sequences[s].q_len * sequences[s].context_len * heads * head_dim * 2;
  }
  const int64_t num_rows = static_cast<int64_t>(rows.size());
  const RowRef* row_refs = rows.data();

  ctx.ParallelFor(kv_heads * num_rows, work, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> state;
    const size_t need =
        static_cast<size_t>(group * head_dim + group * block_size + 2 * group + 2 * head_dim);
    if (state.size() < need)
      state.resize(need);
    float* acc = state.data();                         // [group, head_dim]
    float* scores = acc + group * head_dim;            // [group, block_size]
    float* running_max = scores + group * block_size;  // [group]
    float* running_sum = running_max + group;          // [group]
    float* k_scratch = running_sum + group;            // [head_dim]
    float* v_scratch = k_scratch + head_dim;           // [head_dim]

    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item / num_rows;
      const RowRef ref = row_refs[item % num_rows];
      const AttentionSequence& seq = sequences[static_cast<size_t>(ref.sequence)];
      const int64_t q_row = seq.q_begin + ref.row_in_sequence;
      const int64_t visible = seq.context_len - seq.q_len + ref.row_in_sequence + 1;
      const float* q_heads = qd + (q_row * heads + g * group) * head_dim;

      std::fill(acc, acc + group * head_dim, 0.0f);
      std::fill(running_max, running_max + group, -std::numeric_limits<float>::infinity());
      std::fill(running_sum, running_sum + group, 0.0f);

      for (int64_t b = 0; b * block_size < visible; ++b) {
        const int64_t block_id = seq.block_table[static_cast<size_t>(b)];
        const int64_t count = std::min(block_size, visible - b * block_size);
        for (int64_t p = 0; p < count; ++p) {
          const float* krow = PoolRow(isa, k_pool, kbase, slot_bytes, block_id * block_size + p, g,
                                      head_dim, k_scratch);
          for (int64_t h = 0; h < group; ++h) {
            scores[h * block_size + p] = scale * isa.dot(q_heads + h * head_dim, krow, head_dim);
          }
        }
        for (int64_t h = 0; h < group; ++h) {
          float* s = scores + h * block_size;
          const float block_max = *std::max_element(s, s + count);
          const float new_max = std::max(running_max[h], block_max);
          const float correction = std::exp(running_max[h] - new_max);
          running_max[h] = new_max;
          float sum = 0.0f;
          for (int64_t p = 0; p < count; ++p) {
            s[p] = std::exp(s[p] - new_max);
            sum += s[p];
          }
          running_sum[h] = running_sum[h] * correction + sum;
          float* acc_h = acc + h * head_dim;
          for (int64_t t = 0; t < head_dim; ++t)
            acc_h[t] *= correction;
        }
        for (int64_t p = 0; p < count; ++p) {
          const float* vrow = PoolRow(isa, v_pool, vbase, slot_bytes, block_id * block_size + p, g,
                                      head_dim, v_scratch);
          for (int64_t h = 0; h < group; ++h) {
            isa.scale_add(1.0f, acc + h * head_dim, scores[h * block_size + p], vrow, head_dim);
          }
        }
      }
      for (int64_t h = 0; h < group; ++h) {
        float* o = od + (q_row * heads + g * group + h) * head_dim;
        const float inv = 1.0f / running_sum[h];
        for (int64_t t = 0; t < head_dim; ++t)
          o[t] = acc[h * head_dim + t] * inv;
      }
    }
  });
}

}  // namespace switchyard::runtime::cpu
