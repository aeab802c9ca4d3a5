// Paged attention (queries rounded to a 16-bit KV dtype first, as llama.cpp does). Work items are
// (kv head, tile of up to a few consecutive query rows of one sequence), kv-head major so that the
// causal triangle's cost spreads over threads. An item treats its rows times the query heads
// sharing its kv head (GQA) as one set of query vectors, so each K/V row is read once per item and,
// in prefill, the ISA loops see enough query vectors to work like a small GEMM. Softmax is online,
// one KV block at a time: scores of the block, then per query vector a running max and rescaled
// accumulators, in f32, over a few KV blocks at a time. Rows of a tile see different numbers of
// positions (causal); a vector's scores past its last visible position become zero probabilities.
// With a sliding window an item starts at the block holding its first row's first visible
// position, so blocks before the window are never read (decode over a long context reads
// only the window's blocks); in that first block, and for later rows of a prefill tile
// whose windows start later, scores before a vector's window become zero probabilities too.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/internal/kernels.h"
#include "runtime/float16.h"

namespace switchyard::runtime::cpu {
namespace {

// Query vectors (rows x heads per kv head) an item aims for.
constexpr int64_t kTileVectors = 16;
// KV positions, at least, whose scores go through one softmax update: the update (max, exp
// and the rescale of every accumulator) costs the same for few positions as for many.
constexpr int64_t kStepPositions = 64;

// Starts bringing the first `bytes` of each of the rows into cache, so that the kernel that
// reads them next finds them there: a kv head's rows are short runs at a stride of a whole
// slot, in blocks anywhere in the pool, which the hardware prefetchers do not run ahead on.
void PrefetchRows(const KvRows& rows, size_t bytes) {
  constexpr size_t kLineBytes = 64;
  for (int64_t b = 0; b * rows.block_rows < rows.count; ++b) {
    const uint8_t* row = rows.blocks[b];
    for (int64_t i = rows.rows_in_block(b); i > 0; --i, row += rows.row_stride) {
      for (size_t offset = 0; offset < bytes; offset += kLineBytes)
        __builtin_prefetch(row + offset);
      __builtin_prefetch(row + bytes - 1);
    }
  }
}

// Rounds query values to a 16-bit KV dtype, as llama.cpp's attention does (its K x Q
// product runs in the dtype of K): on the same weights, greedy decoding then falls on the
// same side of near ties as llama.cpp more often (SmolLM2-135M Q4_1, teacher-forced on
// llama.cpp's greedy tokens: 501 of 512 top-1s agree, against 496 with f32 queries).
void RoundToKvDType(DType kv_dtype, float* q, int64_t n) {
  if (kv_dtype == DType::kF16) {
    for (int64_t t = 0; t < n; ++t)
      q[t] = F16ToF32(F32ToF16(q[t]));
  } else if (kv_dtype == DType::kBF16) {
    for (int64_t t = 0; t < n; ++t)
      q[t] = Bf16ToF32(F32ToBf16(q[t]));
  }
}

struct TileRef {
  int32_t sequence;
  int32_t first_row;  // within the sequence's q_len rows
  int32_t rows;
};

}  // namespace

void PagedAttentionKernel(const KernelContext& ctx, const Tensor& q, const Tensor& k_pool,
                          const Tensor& v_pool, std::span<const AttentionSequence> sequences,
                          float scale, int64_t window, const Tensor& out) {
  const int64_t heads = q.dim(1);
  const int64_t head_dim = q.dim(2);
  const int64_t block_size = k_pool.dim(1);
  const int64_t kv_heads = k_pool.dim(2);
  const int64_t group = heads / kv_heads;
  const DType kv_dtype = k_pool.dtype();
  const size_t slot_bytes = RowBytes(kv_dtype, kv_heads * head_dim);
  const auto* kbase = static_cast<const uint8_t*>(k_pool.data());
  const auto* vbase = static_cast<const uint8_t*>(v_pool.data());
  const auto* qd = q.data_as<const float>();
  auto* od = out.data_as<float>();
  const IsaKernels& isa = *ctx.isa;
  const int64_t tile_rows = std::max<int64_t>(1, kTileVectors / group);
  const int64_t max_vectors = tile_rows * group;
  const int64_t blocks_per_step = (kStepPositions + block_size - 1) / block_size;
  const int64_t span = blocks_per_step * block_size;

  // Grows once per backend thread; reused by every later call.
  thread_local std::vector<TileRef> tiles;
  tiles.clear();
  int64_t work = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    for (int64_t i = 0; i < sequences[s].q_len; i += tile_rows) {
      tiles.push_back({static_cast<int32_t>(s), static_cast<int32_t>(i),
                       static_cast<int32_t>(std::min(tile_rows, sequences[s].q_len - i))});
    }
    const int64_t seen =
        window > 0 ? std::min(window, sequences[s].context_len) : sequences[s].context_len;
    work += sequences[s].q_len * seen * heads * head_dim * 2;
  }
  const auto num_tiles = static_cast<int64_t>(tiles.size());
  const TileRef* tile_refs = tiles.data();

  ctx.ParallelFor(kv_heads * num_tiles, work, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> state;
    const size_t need = static_cast<size_t>(max_vectors * (2 * head_dim + span + 2));
    if (state.size() < need)
      state.resize(need);
    float* q_tile = state.data();                      // [vectors, head_dim]
    float* acc = q_tile + max_vectors * head_dim;      // [vectors, head_dim]
    float* scores = acc + max_vectors * head_dim;      // [vectors, span]
    float* running_max = scores + max_vectors * span;  // [vectors]
    float* running_sum = running_max + max_vectors;    // [vectors]
    // The K and V blocks of one step, at this item's kv head.
    std::array<const uint8_t*, kStepPositions> k_blocks{};
    std::array<const uint8_t*, kStepPositions> v_blocks{};

    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item / num_tiles;
      const TileRef tile = tile_refs[item % num_tiles];
      const AttentionSequence& seq = sequences[static_cast<size_t>(tile.sequence)];
      const int64_t num_q = tile.rows * group;
      // Vector r is query head g * group + r % group of row first_row + r / group.
      for (int64_t i = 0; i < tile.rows; ++i) {
        const int64_t q_row = seq.q_begin + tile.first_row + i;
        std::memcpy(q_tile + i * group * head_dim, qd + (q_row * heads + g * group) * head_dim,
                    static_cast<size_t>(group * head_dim) * sizeof(float));
      }
      RoundToKvDType(kv_dtype, q_tile, num_q * head_dim);
      // Row i of the tile sees positions [WindowStart(first_row + i), first_visible + i):
      // one more at the end than the row before, and with a window one fewer at the start.
      const int64_t first_visible = seq.context_len - seq.q_len + tile.first_row + 1;
      const int64_t last_visible = first_visible + tile.rows - 1;
      const int64_t first_block = seq.WindowStart(tile.first_row, window) / block_size;
      const size_t head_offset = RowBytes(kv_dtype, g * head_dim);
      const size_t head_bytes = RowBytes(kv_dtype, head_dim);

      std::fill(acc, acc + num_q * head_dim, 0.0f);
      std::fill(running_max, running_max + num_q, -std::numeric_limits<float>::infinity());
      std::fill(running_sum, running_sum + num_q, 0.0f);

      // One step: the scores of up to blocks_per_step blocks (positions [start, start +
      // count)), one softmax update, then their weighted V rows. The V rows are prefetched
      // while the scores are computed, the next step's K rows while the V rows are summed.
      const auto step_rows = [&](int64_t b0, const uint8_t* base, const uint8_t** blocks) {
        const int64_t count = std::min(span, last_visible - b0 * block_size);
        for (int64_t b = 0; b * block_size < count; ++b) {
          blocks[b] =
              base +
              static_cast<size_t>(seq.block_table[static_cast<size_t>(b0 + b)] * block_size) *
                  slot_bytes +
              head_offset;
        }
        return KvRows{blocks, block_size, slot_bytes, count};
      };
      KvRows k_rows = step_rows(first_block, kbase, k_blocks.data());
      for (int64_t b0 = first_block; b0 * block_size < last_visible; b0 += blocks_per_step) {
        const int64_t start = b0 * block_size;
        const int64_t count = k_rows.count;
        const KvRows v_rows = step_rows(b0, vbase, v_blocks.data());
        PrefetchRows(v_rows, head_bytes);
        isa.kv_scores(kv_dtype, q_tile, num_q, head_dim, k_rows, scale, scores, span);
        if ((b0 + blocks_per_step) * block_size < last_visible) {
          k_rows = step_rows(b0 + blocks_per_step, kbase, k_blocks.data());
          PrefetchRows(k_rows, head_bytes);
        }
        // Scores become probabilities (unnormalized, relative to the new running max); what
        // was accumulated so far is rescaled to that max.
        for (int64_t r = 0; r < num_q; ++r) {
          float* s = scores + r * span;
          const int64_t i = r / group;
          const int64_t lo =
              std::max<int64_t>(0, seq.WindowStart(tile.first_row + i, window) - start);
          const int64_t hi = std::min(count, first_visible + i - start);
          if (hi <= lo) {
            std::fill(s, s + count, 0.0f);
            continue;
          }
          const float old_max = running_max[r];
          const float sum = isa.softmax_step(s + lo, hi - lo, &running_max[r]);
          const float correction = std::exp(old_max - running_max[r]);
          running_sum[r] = running_sum[r] * correction + sum;
          std::fill(s, s + lo, 0.0f);
          std::fill(s + hi, s + count, 0.0f);
          if (correction != 1.0f) {
            float* acc_r = acc + r * head_dim;
            for (int64_t t = 0; t < head_dim; ++t)
              acc_r[t] *= correction;
          }
        }
        isa.kv_accumulate(kv_dtype, scores, span, num_q, head_dim, v_rows, acc);
      }
      for (int64_t r = 0; r < num_q; ++r) {
        const int64_t q_row = seq.q_begin + tile.first_row + r / group;
        float* o = od + (q_row * heads + g * group + r % group) * head_dim;
        const float inv = 1.0f / running_sum[r];
        for (int64_t t = 0; t < head_dim; ++t)
          o[t] = acc[r * head_dim + t] * inv;
      }
    }
  });
}

}  // namespace switchyard::runtime::cpu
