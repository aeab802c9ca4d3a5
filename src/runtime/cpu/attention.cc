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
// Decode rows of sequences that hold their leading positions in the same blocks (prefix
// caching) attend that shared run first, once for all of them (SharedPrefix), as cascade
// attention does on GPUs; each row's own item then goes on from the state it left.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {
namespace {

// Query vectors (rows x heads per kv head) an item aims for. A prefill tile transposes each
// K block it reads once for all its vectors, so more vectors share each transpose: 48
// against 16 made a 512-row prefill's attention 1.16x faster (BM_AttentionPrefill_F16, one
// thread; 96 gained 2% more and leaves fewer items to balance).
constexpr int64_t kTileVectors = 48;
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

// to[t] = from[t] rounded to a 16-bit KV dtype (F32: copied), t < n, as llama.cpp's
// attention does (its K x Q product runs in the dtype of K): on the same weights, greedy
// decoding then falls on the same side of near ties as llama.cpp more often (SmolLM2-135M
// Q4_1, teacher-forced on llama.cpp's greedy tokens: 501 of 512 top-1s agree, against 496
// with f32 queries). Through the ISA's converters: one value at a time, it was 3.5% of a
// prefill step.
void RoundToKvDType(const IsaKernels& isa, DType kv_dtype, const float* from, int64_t n,
                    float* to) {
  if (kv_dtype != DType::kF16 && kv_dtype != DType::kBF16) {
    std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  thread_local std::vector<uint16_t> rounded;
  if (rounded.size() < static_cast<size_t>(n))
    rounded.resize(static_cast<size_t>(n));
  isa.from_f32(kv_dtype, from, n, rounded.data());
  isa.to_f32(kv_dtype, rounded.data(), n, to);
}

// What every work item of one call shares: the shapes, the pools and the kernels.
struct AttentionCall {
  const IsaKernels* isa;
  DType kv_dtype;
  int64_t head_dim;
  int64_t block_size;
  size_t slot_bytes;  // one KV position, all kv heads
  const uint8_t* kbase;
  const uint8_t* vbase;
  float scale;
  int64_t blocks_per_step;
  int64_t span;  // positions per step
};

// The online-softmax state of num_q query vectors of one kv head, in a thread's scratch.
struct VectorSet {
  int64_t num_q;
  bool by_columns;         // kv_scores' order: the one each vector's own tile takes
  float* q;                // [num_q, head_dim], rounded to the KV dtype
  float* acc;              // [num_q, head_dim]
  float* scores;           // [num_q, span]
  float* max;              // [num_q]
  float* sum;              // [num_q]
  int64_t* visible_begin;  // [num_q]: vector r sees positions [visible_begin, visible_end)
  int64_t* visible_end;

  // Nothing seen yet: empty accumulators and sums, running maxima -inf.
  void Reset(int64_t head_dim) const {
    std::fill(acc, acc + num_q * head_dim, 0.0f);
    std::fill(max, max + num_q, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + num_q, 0.0f);
  }
};

// Attends the vectors of `set` to the positions [first_block * block_size, end) of kv head
// `kv_head` whose blocks `block_table` lists, a step (blocks_per_step blocks) at a time:
// the scores of the step, one softmax update, then their weighted V rows. The V rows are
// prefetched while the scores are computed, the next step's K rows while the V rows are
// summed. Splitting the positions between two calls where a step would start anyway (a
// multiple of blocks_per_step blocks after first_block) leaves every result the same.
void AttendBlocks(const AttentionCall& call, int64_t kv_head, const int32_t* block_table,
                  int64_t first_block, int64_t end, const VectorSet& set) {
  const IsaKernels& isa = *call.isa;
  const size_t head_offset = RowBytes(call.kv_dtype, kv_head * call.head_dim);
  const size_t head_bytes = RowBytes(call.kv_dtype, call.head_dim);
  const int64_t head_dim = call.head_dim;
  const int64_t span = call.span;
  // The K and V blocks of one step, at this kv head.
  std::array<const uint8_t*, kStepPositions> k_blocks{};
  std::array<const uint8_t*, kStepPositions> v_blocks{};
  const auto step_rows = [&](int64_t b0, const uint8_t* base, const uint8_t** blocks) {
    const int64_t count = std::min(span, end - b0 * call.block_size);
    for (int64_t b = 0; b * call.block_size < count; ++b) {
      blocks[b] = base +
                  static_cast<size_t>(block_table[b0 + b] * call.block_size) * call.slot_bytes +
                  head_offset;
    }
    return KvRows{blocks, call.block_size, call.slot_bytes, count};
  };
  KvRows k_rows = step_rows(first_block, call.kbase, k_blocks.data());
  for (int64_t b0 = first_block; b0 * call.block_size < end; b0 += call.blocks_per_step) {
    const int64_t start = b0 * call.block_size;
    const int64_t count = k_rows.count;
    const KvRows v_rows = step_rows(b0, call.vbase, v_blocks.data());
    PrefetchRows(v_rows, head_bytes);
    isa.kv_scores(call.kv_dtype, set.q, set.num_q, head_dim, k_rows, call.scale, set.scores, span,
                  set.by_columns);
    if ((b0 + call.blocks_per_step) * call.block_size < end) {
      k_rows = step_rows(b0 + call.blocks_per_step, call.kbase, k_blocks.data());
      PrefetchRows(k_rows, head_bytes);
    }
    // Scores become probabilities (unnormalized, relative to the new running max); what
    // was accumulated so far is rescaled to that max.
    for (int64_t r = 0; r < set.num_q; ++r) {
      float* s = set.scores + r * span;
      const int64_t lo = std::max<int64_t>(0, set.visible_begin[r] - start);
      const int64_t hi = std::min(count, set.visible_end[r] - start);
      if (hi <= lo) {
        std::fill(s, s + count, 0.0f);
        continue;
      }
      const float old_max = set.max[r];
      const float sum = isa.softmax_step(s + lo, hi - lo, &set.max[r]);
      const float correction = std::exp(old_max - set.max[r]);
      set.sum[r] = set.sum[r] * correction + sum;
      std::fill(s, s + lo, 0.0f);
      std::fill(s + hi, s + count, 0.0f);
      if (correction != 1.0f) {
        float* acc_r = set.acc + r * head_dim;
        for (int64_t t = 0; t < head_dim; ++t)
          acc_r[t] *= correction;
      }
    }
    isa.kv_accumulate(call.kv_dtype, set.scores, span, set.num_q, head_dim, v_rows, set.acc);
  }
}

// Carves a VectorSet for up to max_vectors vectors out of this thread's scratch.
VectorSet ThreadVectorSet(const AttentionCall& call, int64_t max_vectors) {
  thread_local std::vector<float> floats;
  thread_local std::vector<int64_t> bounds;
  const auto need = static_cast<size_t>(max_vectors * (2 * call.head_dim + call.span + 2));
  if (floats.size() < need)
    floats.resize(need);
  if (bounds.size() < static_cast<size_t>(2 * max_vectors))
    bounds.resize(static_cast<size_t>(2 * max_vectors));
  VectorSet set{};
  set.q = floats.data();
  set.acc = set.q + max_vectors * call.head_dim;
  set.scores = set.acc + max_vectors * call.head_dim;
  set.max = set.scores + max_vectors * call.span;
  set.sum = set.max + max_vectors;
  set.visible_begin = bounds.data();
  set.visible_end = set.visible_begin + max_vectors;
  return set;
}

// A run of leading KV positions [0, positions) that several decode sequences hold in the
// same blocks (prefix caching gave them one copy): attended once for the query vectors of
// all of them, a chunk of vectors per work item, instead of once per sequence. Each
// vector's online-softmax state is then where its own work item starts. Results are the
// same bits as without it: the same kv_scores order, and the split falls on a step
// boundary.
struct SharedPrefix {
  int64_t first_member;  // into the members array
  int64_t num_members;
  int64_t positions;  // a multiple of the step span
  const int32_t* blocks;
};

// Members [first_member, first_member + members) of a prefix; vector v of the chunk is query
// head v % group (of the item's kv head) of its member v / group.
struct PrefixChunk {
  int32_t prefix;
  int32_t first_member;  // slot in the members array
  int32_t members;
};

struct TileRef {
  int32_t sequence;
  int32_t first_row;  // within the sequence's q_len rows
  int32_t rows;
  int32_t member;  // its slot among the shared prefixes' members, or -1
  int32_t prefix;  // the member's shared prefix, or -1
};

// Shared prefixes shorter than this are attended per sequence: a chunk's gathering and
// handing over of state costs about as much as a few steps.
constexpr int64_t kMinSharedPositions = 2 * kStepPositions;
// Query vectors per work item of a shared prefix.
constexpr int64_t kPrefixChunkVectors = 32;

// The shared prefixes of one call, and what their work items leave for the sequences' own.
struct SharedPrefixPlan {
  std::vector<SharedPrefix> prefixes;
  // members[slot] is a sequence index; member_of[s] is sequence s's slot and prefix_of[s]
  // its prefix, or both -1.
  std::vector<int32_t> members;
  std::vector<int32_t> member_of;
  std::vector<int32_t> prefix_of;
  std::vector<PrefixChunk> chunks;
  // Per kv head and member slot, per query head of the group: acc[head_dim], max, sum after
  // the prefix.
  std::vector<float> states;

  void Clear(size_t num_sequences) {
    prefixes.clear();
    members.clear();
    member_of.assign(num_sequences, -1);
    prefix_of.assign(num_sequences, -1);
  }
};

// Fills plan's prefixes and members from the decode sequences (q_len == 1).
void FindSharedPrefixes(std::span<const AttentionSequence> sequences, int64_t block_size,
                        int64_t span, SharedPrefixPlan* plan) {
  plan->Clear(sequences.size());
  thread_local std::vector<int32_t> order;
  order.clear();
  for (size_t s = 0; s < sequences.size(); ++s) {
    if (sequences[s].q_len == 1 && sequences[s].context_len >= kMinSharedPositions)
      order.push_back(static_cast<int32_t>(s));
  }
  const auto first_block = [&](int32_t s) {
    return sequences[static_cast<size_t>(s)].block_table[0];
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return first_block(a) < first_block(b); });
  // Within a run of sequences that start in the same block, each one's shared positions
  // with the run's longest sequence (the lead) decide: the prefix covers the members that
  // share at least P positions with the lead (and so with each other), P chosen to
  // maximise members x P; the rest attend alone.
  thread_local std::vector<std::pair<int64_t, int32_t>> shared;  // (positions, sequence)
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && first_block(order[j]) == first_block(order[i]))
      ++j;
    if (j - i < 2) {
      i = j;
      continue;
    }
    const auto longest =
        std::max_element(order.begin() + static_cast<std::ptrdiff_t>(i),
                         order.begin() + static_cast<std::ptrdiff_t>(j), [&](int32_t a, int32_t b) {
                           return sequences[static_cast<size_t>(a)].context_len <
                                  sequences[static_cast<size_t>(b)].context_len;
                         });
    const AttentionSequence& lead = sequences[static_cast<size_t>(*longest)];
    shared.clear();
    for (size_t m = i; m < j; ++m) {
      const AttentionSequence& other = sequences[static_cast<size_t>(order[m])];
      const int64_t blocks = (other.context_len + block_size - 1) / block_size;
      int64_t same = 0;
      while (same < blocks && lead.block_table[static_cast<size_t>(same)] ==
                                  other.block_table[static_cast<size_t>(same)])
        ++same;
      const int64_t positions = std::min(same * block_size, other.context_len);
      shared.emplace_back(positions - positions % span, order[m]);
    }
    i = j;
    std::sort(shared.begin(), shared.end(), std::greater<>());
    size_t take = 0;
    for (size_t k = 1; k < shared.size(); ++k) {
      if (shared[k].first >= kMinSharedPositions &&
          (take == 0 || static_cast<int64_t>(k + 1) * shared[k].first >
                            static_cast<int64_t>(take) * shared[take - 1].first))
        take = k + 1;
    }
    if (take == 0)
      continue;
    const auto index = static_cast<int32_t>(plan->prefixes.size());
    plan->prefixes.push_back({static_cast<int64_t>(plan->members.size()),
                              static_cast<int64_t>(take), shared[take - 1].first,
                              lead.block_table.data()});
    for (size_t m = 0; m < take; ++m) {
      const auto s = static_cast<size_t>(shared[m].second);
      plan->member_of[s] = static_cast<int32_t>(plan->members.size());
      plan->prefix_of[s] = index;
      plan->members.push_back(shared[m].second);
    }
  }
}

}  // namespace

void PagedAttentionKernel(const KernelContext& ctx, const Tensor& q, const Tensor& k_pool,
                          const Tensor& v_pool, std::span<const AttentionSequence> sequences,
                          float scale, int64_t window, const Tensor& out) {
  const int64_t heads = q.dim(1);
  const int64_t head_dim = q.dim(2);
  const int64_t kv_heads = k_pool.dim(2);
  const int64_t group = heads / kv_heads;
  AttentionCall call{};
  call.isa = ctx.isa;
  call.kv_dtype = k_pool.dtype();
  call.head_dim = head_dim;
  call.block_size = k_pool.dim(1);
  call.slot_bytes = RowBytes(call.kv_dtype, kv_heads * head_dim);
  call.kbase = static_cast<const uint8_t*>(k_pool.data());
  call.vbase = static_cast<const uint8_t*>(v_pool.data());
  call.scale = scale;
  call.blocks_per_step = (kStepPositions + call.block_size - 1) / call.block_size;
  call.span = call.blocks_per_step * call.block_size;
  const int64_t block_size = call.block_size;
  const auto* qd = q.data_as<const float>();
  auto* od = out.data_as<float>();
  const int64_t tile_rows = std::max<int64_t>(1, kTileVectors / group);
  const int64_t max_vectors = tile_rows * group;
  const auto by_columns = [&](int64_t vectors) {
    return vectors >= call.isa->min_column_score_queries;
  };
  // The query vectors of q row `row` at kv head `kv_head` (its `group` query heads),
  // rounded to the KV dtype.
  const auto load_query = [&](float* to, int64_t row, int64_t kv_head) {
    RoundToKvDType(*call.isa, call.kv_dtype, qd + (row * heads + kv_head * group) * head_dim,
                   group * head_dim, to);
  };

  // Grow once per calling thread and are reused by every later call; the work items (on
  // other threads too) reach them through these references.
  thread_local SharedPrefixPlan thread_plan;
  thread_local std::vector<TileRef> thread_tiles;
  SharedPrefixPlan& plan = thread_plan;
  std::vector<TileRef>& tiles = thread_tiles;
  if (window == 0)
    FindSharedPrefixes(sequences, block_size, call.span, &plan);
  else
    plan.Clear(sequences.size());
  const std::vector<SharedPrefix>& prefixes = plan.prefixes;
  const std::vector<int32_t>& members = plan.members;
  std::vector<PrefixChunk>& chunks = plan.chunks;
  std::vector<float>& prefix_states = plan.states;

  const int64_t state_floats = head_dim + 2;
  const auto num_members = static_cast<int64_t>(members.size());
  if (!prefixes.empty()) {
    const int64_t chunk_members = std::max<int64_t>(1, kPrefixChunkVectors / group);
    chunks.clear();
    int64_t prefix_work = 0;
    for (size_t p = 0; p < prefixes.size(); ++p) {
      const SharedPrefix& prefix = prefixes[p];
      for (int64_t m = 0; m < prefix.num_members; m += chunk_members) {
        chunks.push_back({static_cast<int32_t>(p), static_cast<int32_t>(prefix.first_member + m),
                          static_cast<int32_t>(std::min(chunk_members, prefix.num_members - m))});
      }
      prefix_work += prefix.num_members * heads * prefix.positions * head_dim * 2;
    }
    prefix_states.resize(static_cast<size_t>(kv_heads * num_members * group * state_floats));
    const auto num_chunks = static_cast<int64_t>(chunks.size());
    ctx.ParallelFor(kv_heads * num_chunks, prefix_work, [&](int64_t begin, int64_t end) {
      VectorSet set = ThreadVectorSet(call, chunk_members * group);
      set.by_columns = by_columns(group);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t g = item / num_chunks;
        const PrefixChunk& chunk = chunks[static_cast<size_t>(item % num_chunks)];
        const SharedPrefix& prefix = prefixes[static_cast<size_t>(chunk.prefix)];
        set.num_q = chunk.members * group;
        for (int64_t m = 0; m < chunk.members; ++m) {
          const auto slot = static_cast<size_t>(chunk.first_member + m);
          load_query(set.q + m * group * head_dim,
                     sequences[static_cast<size_t>(members[slot])].q_begin, g);
        }
        set.Reset(head_dim);
        std::fill(set.visible_begin, set.visible_begin + set.num_q, 0);
        std::fill(set.visible_end, set.visible_end + set.num_q, prefix.positions);
        AttendBlocks(call, g, prefix.blocks, 0, prefix.positions, set);
        for (int64_t r = 0; r < set.num_q; ++r) {
          float* state = prefix_states.data() +
                         ((g * num_members + chunk.first_member) * group + r) * state_floats;
          std::memcpy(state, set.acc + r * head_dim, static_cast<size_t>(head_dim) * sizeof(float));
          state[head_dim] = set.max[r];
          state[head_dim + 1] = set.sum[r];
        }
      }
    });
  }

  tiles.clear();
  int64_t work = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    for (int64_t i = 0; i < sequences[s].q_len; i += tile_rows) {
      tiles.push_back({static_cast<int32_t>(s), static_cast<int32_t>(i),
                       static_cast<int32_t>(std::min(tile_rows, sequences[s].q_len - i)),
                       plan.member_of[s], plan.prefix_of[s]});
    }
    int64_t seen =
        window > 0 ? std::min(window, sequences[s].context_len) : sequences[s].context_len;
    if (plan.prefix_of[s] >= 0)
      seen -= prefixes[static_cast<size_t>(plan.prefix_of[s])].positions;
    work += sequences[s].q_len * seen * heads * head_dim * 2;
  }
  const auto num_tiles = static_cast<int64_t>(tiles.size());

  ctx.ParallelFor(kv_heads * num_tiles, work, [&](int64_t begin, int64_t end) {
    const VectorSet set = ThreadVectorSet(call, max_vectors);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item / num_tiles;
      const TileRef tile = tiles[static_cast<size_t>(item % num_tiles)];
      const AttentionSequence& seq = sequences[static_cast<size_t>(tile.sequence)];
      VectorSet tile_set = set;
      tile_set.num_q = tile.rows * group;
      tile_set.by_columns = by_columns(tile_set.num_q);
      for (int64_t i = 0; i < tile.rows; ++i)
        load_query(tile_set.q + i * group * head_dim, seq.q_begin + tile.first_row + i, g);
      // Row i of the tile sees positions [WindowStart(first_row + i), first_visible + i):
      // one more at the end than the row before, and with a window one fewer at the start.
      const int64_t first_visible = seq.context_len - seq.q_len + tile.first_row + 1;
      const int64_t last_visible = first_visible + tile.rows - 1;
      for (int64_t r = 0; r < tile_set.num_q; ++r) {
        tile_set.visible_begin[r] = seq.WindowStart(tile.first_row + r / group, window);
        tile_set.visible_end[r] = first_visible + r / group;
      }
      int64_t first_block = seq.WindowStart(tile.first_row, window) / block_size;
      if (tile.prefix >= 0) {
        first_block = prefixes[static_cast<size_t>(tile.prefix)].positions / block_size;
        for (int64_t r = 0; r < tile_set.num_q; ++r) {
          const float* state =
              prefix_states.data() + ((g * num_members + tile.member) * group + r) * state_floats;
          std::memcpy(tile_set.acc + r * head_dim, state,
                      static_cast<size_t>(head_dim) * sizeof(float));
          tile_set.max[r] = state[head_dim];
          tile_set.sum[r] = state[head_dim + 1];
        }
      } else {
        tile_set.Reset(head_dim);
      }
      if (first_block * block_size < last_visible)
        AttendBlocks(call, g, seq.block_table.data(), first_block, last_visible, tile_set);
      for (int64_t r = 0; r < tile_set.num_q; ++r) {
        const int64_t q_row = seq.q_begin + tile.first_row + r / group;
        float* o = od + (q_row * heads + g * group + r % group) * head_dim;
        const float inv = 1.0f / tile_set.sum[r];
        for (int64_t t = 0; t < head_dim; ++t)
          o[t] = tile_set.acc[r * head_dim + t] * inv;
      }
    }
  });
}

}  // namespace switchyard::runtime::cpu
