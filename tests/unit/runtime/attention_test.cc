// WriteKv + PagedAttention against a double-precision reference that reads K/V from the
// unpaged per-sequence arrays. Covers GQA ratios 1/2/4/8, block tables with holes and
// shuffled ids, mixed prefill chunks and decode rows in one call, long contexts, F16/BF16
// pools, and sliding windows (prefill chunks crossing the window's edge, decode far past
// it, window 1, windows covering the whole context). Tolerance: 2e-5 absolute (outputs are
// convex mixes of values in [-1, 1]; f32 online softmax). For F16/BF16 pools the reference
// uses the rounded K/V values. Decode rows sharing prefix blocks are checked bit for bit
// against each sequence attended alone.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "gtest/gtest.h"

#include "runtime_test_util.h"

namespace switchyard::runtime {
namespace {

using testing::HostTensor;
using testing::MakeBackend;
using testing::RandomFloats;

struct SeqSpec {
  int64_t context_len;  // After this step.
  int64_t q_len;        // New tokens in this step.
};

struct AttentionCase {
  int64_t heads, kv_heads, head_dim, block_size;
  std::vector<SeqSpec> seqs;
  DType pool_dtype = DType::kF32;
  int64_t window = 0;  // PagedAttention's sliding window; 0: none
};

float RoundTo(DType dtype, float f) {
  if (dtype == DType::kF16)
    return F16ToF32(F32ToF16(f));
  if (dtype == DType::kBF16)
    return Bf16ToF32(F32ToBf16(f));
  return f;
}

void RunCase(Backend& backend, const AttentionCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t row = c.kv_heads * c.head_dim;
  // Blocks per sequence, then a pool with spare blocks; ids shuffled so tables have holes.
  int64_t total_blocks = 0;
  for (const SeqSpec& s : c.seqs)
    total_blocks += (s.context_len + c.block_size - 1) / c.block_size;
  const int64_t num_blocks = total_blocks * 2 + 3;
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);

  const size_t elem = static_cast<size_t>(DTypeBlockBytes(c.pool_dtype));
  const size_t pool_bytes = static_cast<size_t>(num_blocks * c.block_size * row) * elem;
  std::vector<uint8_t> k_pool_data(pool_bytes, 0xff), v_pool_data(pool_bytes, 0xff);
  const Tensor k_pool(c.pool_dtype, {num_blocks, c.block_size, c.kv_heads, c.head_dim},
                      k_pool_data.data(), MemorySpace::kHost);
  const Tensor v_pool(c.pool_dtype, {num_blocks, c.block_size, c.kv_heads, c.head_dim},
                      v_pool_data.data(), MemorySpace::kHost);

  // Full K/V of every sequence; all written through WriteKv in one call (a negative slot
  // sprinkled in must be skipped).
  std::vector<std::vector<float>> keys, values;
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> k_all, v_all;
  std::vector<int32_t> slots;
  size_t next_id = 0;
  for (const SeqSpec& s : c.seqs) {
    const int64_t blocks = (s.context_len + c.block_size - 1) / c.block_size;
    std::vector<int32_t> table(ids.begin() + static_cast<std::ptrdiff_t>(next_id),
                               ids.begin() + static_cast<std::ptrdiff_t>(next_id + blocks));
    next_id += static_cast<size_t>(blocks) * 2;  // Leave holes between sequences.
    keys.push_back(RandomFloats(rng, s.context_len * row));
    values.push_back(RandomFloats(rng, s.context_len * row));
    for (int64_t p = 0; p < s.context_len; ++p) {
      slots.push_back(table[static_cast<size_t>(p / c.block_size)] *
                          static_cast<int32_t>(c.block_size) +
                      static_cast<int32_t>(p % c.block_size));
      k_all.insert(k_all.end(), keys.back().begin() + p * row, keys.back().begin() + (p + 1) * row);
      v_all.insert(v_all.end(), values.back().begin() + p * row,
                   values.back().begin() + (p + 1) * row);
      if (p == 0) {
        slots.push_back(-1);
        k_all.insert(k_all.end(), static_cast<size_t>(row), 99.0f);
        v_all.insert(v_all.end(), static_cast<size_t>(row), 99.0f);
      }
    }
    tables.push_back(std::move(table));
  }
  const int64_t n_kv = static_cast<int64_t>(slots.size());
  ASSERT_TRUE(backend
                  .WriteKv(HostTensor(DType::kF32, {n_kv, c.kv_heads, c.head_dim}, k_all.data()),
                           HostTensor(DType::kF32, {n_kv, c.kv_heads, c.head_dim}, v_all.data()),
                           HostTensor(DType::kI32, {n_kv}, slots.data()), k_pool, v_pool)
                  .ok());

  // With a window, blocks that end before a sequence's first query row's window point at
  // an unused block, still all 0xff bytes (NaN in F32, F16 and BF16): a kernel that reads
  // one, even with zero weight, turns the output into NaN.
  if (c.window > 0) {
    const int32_t unused = ids.back();
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      const int64_t first = c.seqs[s].context_len - c.seqs[s].q_len;
      for (int64_t b = 0; (b + 1) * c.block_size <= first - c.window + 1; ++b)
        tables[s][static_cast<size_t>(b)] = unused;
    }
  }

  // Queries: each sequence's last q_len tokens; rows interleaved in reverse sequence order
  // so q_begin is not monotonic.
  int64_t n = 0;
  for (const SeqSpec& s : c.seqs)
    n += s.q_len;
  const std::vector<float> q = RandomFloats(rng, n * c.heads * c.head_dim, -2.0f, 2.0f);
  std::vector<AttentionSequence> batch(c.seqs.size());
  int64_t row_cursor = 0;
  for (size_t s = c.seqs.size(); s-- > 0;) {
    batch[s] = {row_cursor, c.seqs[s].q_len, c.seqs[s].context_len, tables[s]};
    row_cursor += c.seqs[s].q_len;
  }
  std::vector<float> out(q.size(), -5.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  ASSERT_TRUE(backend
                  .PagedAttention(HostTensor(DType::kF32, {n, c.heads, c.head_dim},
                                             const_cast<float*>(q.data())),
                                  k_pool, v_pool, batch, scale, c.window,
                                  HostTensor(DType::kF32, {n, c.heads, c.head_dim}, out.data()))
                  .ok());

  const int64_t group = c.heads / c.kv_heads;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const AttentionSequence& seq = batch[s];
    for (int64_t i = 0; i < seq.q_len; ++i) {
      // The row at position t sees (t - window, t].
      const int64_t visible = seq.context_len - seq.q_len + i + 1;
      const int64_t first = c.window > 0 ? std::max<int64_t>(0, visible - c.window) : 0;
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t g = h / group;
        const float* qv = q.data() + ((seq.q_begin + i) * c.heads + h) * c.head_dim;
        std::vector<double> logits(static_cast<size_t>(visible), 0.0);
        double max_logit = -1e300;
        for (int64_t p = first; p < visible; ++p) {
          double dot = 0;
          for (int64_t t = 0; t < c.head_dim; ++t) {
            // Queries are rounded to the pool's dtype too, as the kernel does (llama.cpp's rule).
            dot +=
                static_cast<double>(RoundTo(c.pool_dtype, qv[t])) *
                RoundTo(c.pool_dtype, keys[s][static_cast<size_t>(p * row + g * c.head_dim + t)]);
          }
          logits[static_cast<size_t>(p)] = dot * scale;
          max_logit = std::max(max_logit, dot * scale);
        }
        double denom = 0;
        for (int64_t p = first; p < visible; ++p) {
          double& l = logits[static_cast<size_t>(p)];
          denom += (l = std::exp(l - max_logit));
        }
        for (int64_t t = 0; t < c.head_dim; ++t) {
          double want = 0;
          for (int64_t p = first; p < visible; ++p) {
            want +=
                logits[static_cast<size_t>(p)] *
                RoundTo(c.pool_dtype, values[s][static_cast<size_t>(p * row + g * c.head_dim + t)]);
          }
          want /= denom;
          const float got =
              out[static_cast<size_t>(((seq.q_begin + i) * c.heads + h) * c.head_dim + t)];
          ASSERT_NEAR(got, want, 2e-5)
              << "seq " << s << " row " << i << " head " << h << " dim " << t;
        }
      }
    }
  }
}

class PagedAttentionTest : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(PagedAttentionTest, GqaRatiosAndBlockSizes) {
  auto backend = MakeBackend(GetParam());
  uint32_t seed = 10;
  for (int64_t ratio : {1, 2, 4, 8}) {
    for (int64_t block_size : {1, 3, 16}) {
      AttentionCase c{.heads = 2 * ratio,
                      .kv_heads = 2,
                      .head_dim = 16,
                      .block_size = block_size,
                      .seqs = {{1, 1}, {9, 9}, {20, 1}, {17, 5}}};
      RunCase(*backend, c, seed++);
    }
  }
}

TEST_P(PagedAttentionTest, OddHeadDimsAndMixedBatch) {
  auto backend = MakeBackend(GetParam());
  RunCase(*backend,
          {.heads = 3,
           .kv_heads = 1,
           .head_dim = 5,
           .block_size = 4,
           .seqs = {{7, 3}, {1, 1}, {13, 13}}},
          21);
  RunCase(*backend,
          {.heads = 4,
           .kv_heads = 4,
           .head_dim = 33,
           .block_size = 8,
           .seqs = {{40, 1}, {33, 33}, {8, 2}}},
          22);
  RunCase(
      *backend,
      {.heads = 8, .kv_heads = 2, .head_dim = 128, .block_size = 16, .seqs = {{50, 1}, {30, 30}}},
      23);
}

TEST_P(PagedAttentionTest, LongContextDecode) {
  auto backend = MakeBackend(GetParam());
  RunCase(
      *backend,
      {.heads = 8, .kv_heads = 2, .head_dim = 64, .block_size = 16, .seqs = {{2048, 1}, {2000, 3}}},
      31);
}

TEST_P(PagedAttentionTest, HalfPools) {
  auto backend = MakeBackend(GetParam());
  for (DType d : {DType::kF16, DType::kBF16}) {
    RunCase(*backend,
            {.heads = 4,
             .kv_heads = 2,
             .head_dim = 32,
             .block_size = 8,
             .seqs = {{20, 20}, {35, 1}},
             .pool_dtype = d},
            41);
    // The head sizes with register-resident query paths (64, 128), decode and prefill rows.
    for (int64_t head_dim : {64, 128}) {
      RunCase(*backend,
              {.heads = 6,
               .kv_heads = 2,
               .head_dim = head_dim,
               .block_size = 16,
               .seqs = {{70, 1}, {37, 37}, {90, 6}},
               .pool_dtype = d},
              42);
    }
  }
}

// Prefill chunks whose rows' windows start in different blocks (and, for chunks longer
// than the window, rows that no longer see the chunk's start), next to decode rows, for
// every GQA ratio and block sizes below, at and above the window.
TEST_P(PagedAttentionTest, SlidingWindowPrefillCrossesWindowEdge) {
  auto backend = MakeBackend(GetParam());
  uint32_t seed = 50;
  for (int64_t ratio : {1, 2, 4, 8}) {
    for (int64_t block_size : {1, 3, 8, 16}) {
      for (int64_t window : {5, 8, 19}) {
        RunCase(*backend,
                {.heads = 2 * ratio,
                 .kv_heads = 2,
                 .head_dim = 16,
                 .block_size = block_size,
                 .seqs = {{40, 16}, {33, 7}, {25, 25}, {60, 1}, {4, 4}},
                 .window = window},
                seed++);
      }
    }
  }
}

// Decode (and a short chunk) with the context far longer than the window, which starts
// mid-block or on a block edge; the blocks before it are poisoned, so they must be skipped.
TEST_P(PagedAttentionTest, SlidingWindowLongContextDecode) {
  auto backend = MakeBackend(GetParam());
  for (int64_t window : {64, 100, 200}) {
    RunCase(*backend,
            {.heads = 8,
             .kv_heads = 2,
             .head_dim = 64,
             .block_size = 16,
             .seqs = {{2048, 1}, {2000, 3}, {1000, 1}},
             .window = window},
            60);
  }
}

// Window 1: every row sees only its own position.
TEST_P(PagedAttentionTest, SlidingWindowOfOne) {
  auto backend = MakeBackend(GetParam());
  for (int64_t block_size : {1, 4, 16}) {
    RunCase(*backend,
            {.heads = 4,
             .kv_heads = 2,
             .head_dim = 32,
             .block_size = block_size,
             .seqs = {{20, 20}, {9, 1}, {37, 5}},
             .window = 1},
            70);
  }
}

// Windows at least as long as every context: the same as no window.
TEST_P(PagedAttentionTest, SlidingWindowCoveringContext) {
  auto backend = MakeBackend(GetParam());
  for (int64_t window : {20, 21, 4096}) {
    RunCase(*backend,
            {.heads = 4,
             .kv_heads = 1,
             .head_dim = 16,
             .block_size = 3,
             .seqs = {{1, 1}, {9, 9}, {20, 1}, {17, 5}},
             .window = window},
            80);
  }
}

TEST_P(PagedAttentionTest, SlidingWindowHalfPools) {
  auto backend = MakeBackend(GetParam());
  for (DType d : {DType::kF16, DType::kBF16}) {
    for (int64_t head_dim : {32, 64, 128}) {
      RunCase(*backend,
              {.heads = 6,
               .kv_heads = 2,
               .head_dim = head_dim,
               .block_size = 16,
               .seqs = {{70, 1}, {37, 37}, {90, 6}},
               .pool_dtype = d,
               .window = 24},
              90);
    }
  }
}

// Decode rows whose sequences hold their leading positions in the same blocks (prefix
// caching), attended in one call as batched decode does: every output must be the very bits
// of the same sequence attended alone (the kernel attends a shared run once for all its
// sequences, which must not change any result). Groups: 6 sequences sharing 200 positions
// and more, two of them diverging 3 blocks earlier; one whose context ends inside the
// shared blocks; 2 sharing only 2 blocks; a sequence that shares nothing; a prefill chunk
// over the shared blocks.
TEST_P(PagedAttentionTest, SharedPrefixDecodeIsBitIdenticalToEachSequenceAlone) {
  auto backend = MakeBackend(GetParam());
  uint32_t seed = 100;
  for (DType pool_dtype : {DType::kF32, DType::kF16}) {
    for (int64_t group : {1, 3, 8}) {
      for (int64_t head_dim : {32, 64}) {
        for (int64_t block_size : {5, 16}) {
          std::mt19937 rng(seed++);
          const int64_t kv_heads = 2;
          const int64_t heads = kv_heads * group;
          const int64_t row = kv_heads * head_dim;
          const int64_t num_blocks = 4 * ((200 + block_size - 1) / block_size) + 200;
          const size_t elem = static_cast<size_t>(DTypeBlockBytes(pool_dtype));
          const size_t pool_bytes = static_cast<size_t>(num_blocks * block_size * row) * elem;
          std::vector<uint8_t> k_data(pool_bytes), v_data(pool_bytes);
          const Tensor k_pool(pool_dtype, {num_blocks, block_size, kv_heads, head_dim},
                              k_data.data(), MemorySpace::kHost);
          const Tensor v_pool(pool_dtype, {num_blocks, block_size, kv_heads, head_dim},
                              v_data.data(), MemorySpace::kHost);
          const int64_t slots = num_blocks * block_size;
          std::vector<int32_t> slot_ids(static_cast<size_t>(slots));
          std::iota(slot_ids.begin(), slot_ids.end(), 0);
          std::vector<float> k = RandomFloats(rng, slots * row);
          std::vector<float> v = RandomFloats(rng, slots * row);
          ASSERT_TRUE(backend
                          ->WriteKv(HostTensor(DType::kF32, {slots, kv_heads, head_dim}, k.data()),
                                    HostTensor(DType::kF32, {slots, kv_heads, head_dim}, v.data()),
                                    HostTensor(DType::kI32, {slots}, slot_ids.data()), k_pool,
                                    v_pool)
                          .ok());
          // Blocks [0, run) are the long shared run (200 positions and more), [run, run + 2)
          // the short one; the rest are each sequence's own, handed out from 2 * run on.
          const auto run = static_cast<int32_t>((200 + block_size - 1) / block_size);
          int32_t next_own = 2 * run;
          std::vector<std::vector<int32_t>> tables;
          std::vector<std::pair<int64_t, int64_t>> shapes;  // (context_len, q_len)
          const auto add = [&](int64_t context, int64_t q_len, std::vector<int32_t> shared) {
            std::vector<int32_t> table = std::move(shared);
            while (static_cast<int64_t>(table.size()) * block_size < context)
              table.push_back(next_own++);
            tables.push_back(std::move(table));
            shapes.emplace_back(context, q_len);
          };
          std::vector<int32_t> long_run(static_cast<size_t>(run));
          std::iota(long_run.begin(), long_run.end(), 0);
          const std::vector<int32_t> short_run = {run, run + 1};
          const std::vector<int32_t> diverging(long_run.begin(), long_run.end() - 3);
          const int64_t run_positions = run * block_size;
          for (int64_t i = 0; i < 4; ++i)
            add(run_positions + 7 + 13 * i, 1, long_run);
          add(run_positions + 30, 1, diverging);
          add(run_positions - 3 * block_size + 3, 1, diverging);
          add(5 * block_size + 2, 1, long_run);  // ends inside the shared blocks
          add(2 * block_size + 9, 1, short_run);
          add(2 * block_size + 40, 1, short_run);
          add(300, 1, {});
          add(run_positions + 20, 12, long_run);  // a prefill chunk
          int64_t n = 0;
          std::vector<AttentionSequence> batch;
          for (size_t s = 0; s < tables.size(); ++s) {
            batch.push_back({n, shapes[s].second, shapes[s].first, tables[s]});
            n += shapes[s].second;
          }
          const std::vector<float> q = RandomFloats(rng, n * heads * head_dim, -2.0f, 2.0f);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          std::vector<float> together(q.size());
          ASSERT_TRUE(
              backend
                  ->PagedAttention(
                      HostTensor(DType::kF32, {n, heads, head_dim}, const_cast<float*>(q.data())),
                      k_pool, v_pool, batch, scale, 0,
                      HostTensor(DType::kF32, {n, heads, head_dim}, together.data()))
                  .ok());
          for (size_t s = 0; s < batch.size(); ++s) {
            const AttentionSequence& seq = batch[s];
            const int64_t offset = seq.q_begin * heads * head_dim;
            const int64_t values = seq.q_len * heads * head_dim;
            std::vector<float> alone(static_cast<size_t>(values));
            const std::vector<AttentionSequence> one = {
                {0, seq.q_len, seq.context_len, seq.block_table}};
            ASSERT_TRUE(backend
                            ->PagedAttention(
                                HostTensor(DType::kF32, {seq.q_len, heads, head_dim},
                                           const_cast<float*>(q.data()) + offset),
                                k_pool, v_pool, one, scale, 0,
                                HostTensor(DType::kF32, {seq.q_len, heads, head_dim}, alone.data()))
                            .ok());
            for (int64_t i = 0; i < values; ++i) {
              const float got = together[static_cast<size_t>(offset + i)];
              ASSERT_TRUE(std::isfinite(got));
              ASSERT_EQ(std::memcmp(&got, &alone[static_cast<size_t>(i)], sizeof(float)), 0)
                  << "sequence " << s << " value " << i << ": " << got << " alone "
                  << alone[static_cast<size_t>(i)] << " (group " << group << ", head_dim "
                  << head_dim << ", block " << block_size << ")";
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, PagedAttentionTest, ::testing::ValuesIn(testing::SupportedIsas()),
                         testing::IsaParamName);

TEST(PagedAttentionValidationTest, RejectsBadBatches) {
  auto backend = MakeBackend(CpuIsa::kPortable, 1);
  std::vector<float> pool(4 * 2 * 1 * 4), q(2 * 2 * 4), out(q.size());
  const Tensor kp = HostTensor(DType::kF32, {4, 2, 1, 4}, pool.data());
  const Tensor qt = HostTensor(DType::kF32, {2, 2, 4}, q.data());
  const Tensor ot = HostTensor(DType::kF32, {2, 2, 4}, out.data());
  std::vector<int32_t> table = {0};
  std::vector<AttentionSequence> too_short = {{0, 1, 3, table}};
  EXPECT_EQ(backend->PagedAttention(qt, kp, kp, too_short, 1.0f, 0, ot).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> bad_ids = {0, 4};
  std::vector<AttentionSequence> bad_block = {{0, 1, 3, bad_ids}};
  EXPECT_EQ(backend->PagedAttention(qt, kp, kp, bad_block, 1.0f, 0, ot).code(),
            absl::StatusCode::kOutOfRange);
  std::vector<AttentionSequence> rows_outside = {{1, 2, 2, table}};
  EXPECT_EQ(backend->PagedAttention(qt, kp, kp, rows_outside, 1.0f, 0, ot).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<AttentionSequence> fine = {{0, 1, 1, table}};
  EXPECT_EQ(backend->PagedAttention(qt, kp, kp, fine, 1.0f, -1, ot).code(),
            absl::StatusCode::kInvalidArgument);
  // Context 5 in blocks of 2: under window 2 or 3 the row at position 4 sees positions
  // from 3 (or 2) on, in blocks 1 and 2, so block 0 may be missing; window 4 reaches
  // position 1, in block 0.
  std::vector<int32_t> dropped_first = {-1, 0, 1};
  std::vector<AttentionSequence> windowed = {{0, 1, 5, dropped_first}};
  EXPECT_TRUE(backend->PagedAttention(qt, kp, kp, windowed, 1.0f, 2, ot).ok());
  EXPECT_TRUE(backend->PagedAttention(qt, kp, kp, windowed, 1.0f, 3, ot).ok());
  EXPECT_EQ(backend->PagedAttention(qt, kp, kp, windowed, 1.0f, 4, ot).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(backend->PagedAttention(qt, kp, kp, windowed, 1.0f, 0, ot).code(),
            absl::StatusCode::kOutOfRange);
  int32_t slot = 8;
  EXPECT_EQ(backend
                ->WriteKv(HostTensor(DType::kF32, {1, 1, 4}, q.data()),
                          HostTensor(DType::kF32, {1, 1, 4}, q.data()),
                          HostTensor(DType::kI32, {1}, &slot), kp, kp)
                .code(),
            absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace switchyard::runtime
