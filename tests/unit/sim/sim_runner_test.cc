#include "sim/sim_runner.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "engine/block_pool.h"

namespace switchyard::sim {
namespace {

using std::chrono::nanoseconds;

constexpr int64_t kVocab = 64;
constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 32;

// Records each step's requested compute time instead of sleeping.
class FakeClock final : public SimClock {
 public:
  explicit FakeClock(std::vector<nanoseconds>* waits) : waits_(waits) {}
  TimePoint Now() override { return now_; }
  void SleepUntil(TimePoint deadline) override {
    waits_->push_back(deadline - now_);
    now_ = std::max(now_, deadline);
  }

 private:
  std::vector<nanoseconds>* waits_;
  TimePoint now_{std::chrono::seconds(1000)};
};

engine::RunnerLimits Limits() {
  engine::RunnerLimits l;
  l.vocab_size = kVocab;
  l.max_num_batched_tokens = 32;
  l.max_logit_rows = 16;
  l.num_kv_blocks = kNumBlocks;
  l.block_size = kBlockSize;
  return l;
}

// The emittable ids: the odd ones, so a pick outside the list shows.
std::vector<int32_t> EmitTokens() {
  std::vector<int32_t> ids;
  for (int32_t t = 1; t < kVocab; t += 2) {
    ids.push_back(t);
  }
  return ids;
}

// A ForwardBatch and the arrays behind it.
struct TestBatch {
  struct Seq {
    std::vector<int32_t> new_tokens;
    int64_t context_len;
    std::vector<int32_t> table;
  };
  std::vector<Seq> seqs;
  std::vector<int32_t> tokens, positions, slots, rows;
  std::vector<runtime::AttentionSequence> attention;

  // A sequence whose new tokens end a context of `context_len`, kept in `table`'s blocks;
  // `all_rows` asks logits for every new row, else for the last one.
  TestBatch& Add(std::vector<int32_t> new_tokens, int64_t context_len, std::vector<int32_t> table,
                 bool all_rows = false) {
    const auto q_len = static_cast<int64_t>(new_tokens.size());
    const auto q_begin = static_cast<int64_t>(tokens.size());
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t pos = context_len - q_len + i;
      tokens.push_back(new_tokens[static_cast<size_t>(i)]);
      positions.push_back(static_cast<int32_t>(pos));
      slots.push_back(table[static_cast<size_t>(pos / kBlockSize)] * kBlockSize +
                      static_cast<int32_t>(pos % kBlockSize));
      if (all_rows || i == q_len - 1) {
        rows.push_back(static_cast<int32_t>(q_begin + i));
      }
    }
    seqs.push_back({std::move(new_tokens), context_len, std::move(table)});
    attention.push_back({q_begin, q_len, context_len, {}});
    return *this;
  }

  model::ForwardBatch View() {
    for (size_t s = 0; s < seqs.size(); ++s) {
      attention[s].block_table = seqs[s].table;
    }
    return {tokens, positions, slots, attention, rows};
  }
};

class SimRunnerTest : public ::testing::Test {
 protected:
  std::unique_ptr<SimRunner> MakeRunner(const LatencyParams& latency = LatencyParams::Zero()) {
    auto runner =
        SimRunner::Create(Limits(), latency, EmitTokens(), std::make_unique<FakeClock>(&waits_));
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? std::move(*runner) : nullptr;
  }

  // Runs the batch and returns the greedy pick of each logit row.
  std::vector<int32_t> Picks(SimRunner& runner, TestBatch& batch) {
    std::vector<float> logits(batch.rows.size() * kVocab, -1.0f);
    absl::Status status = runner.Execute(batch.View(), logits);
    EXPECT_TRUE(status.ok()) << status;
    std::vector<int32_t> picks;
    for (size_t r = 0; r < batch.rows.size(); ++r) {
      auto row = std::span<const float>(logits).subspan(r * kVocab, kVocab);
      auto best = std::max_element(row.begin(), row.end());
      EXPECT_EQ(*best, kSimChosenLogit);
      EXPECT_EQ(std::count(row.begin(), row.end(), 0.0f), kVocab - 1) << "one hot per row";
      picks.push_back(static_cast<int32_t>(best - row.begin()));
    }
    return picks;
  }

  std::vector<nanoseconds> waits_;
};

TEST_F(SimRunnerTest, GreedyPicksTheChosenTokenOfEachRow) {
  auto runner = MakeRunner();
  TestBatch batch;
  batch.Add({5, 6, 7, 8, 9}, 5, {3, 7});  // prompt, one chunk
  batch.Add({11}, 9, {0, 1, 2});          // decode
  const std::vector<int32_t> picks = Picks(*runner, batch);
  ASSERT_EQ(picks.size(), 2u);
  EXPECT_EQ(picks[0], runner->ChosenToken(9, 4));
  EXPECT_EQ(picks[1], runner->ChosenToken(11, 8));
  const std::vector<int32_t> emit = EmitTokens();
  for (int32_t pick : picks) {
    EXPECT_NE(std::find(emit.begin(), emit.end(), pick), emit.end());
  }
  EXPECT_EQ(runner->backend_name(), "sim");
}

TEST_F(SimRunnerTest, ChoiceDependsOnPositionAndToken) {
  auto runner = MakeRunner();
  std::set<int32_t> by_position, by_token;
  for (int32_t p = 0; p < 64; ++p) {
    by_position.insert(runner->ChosenToken(7, p));
  }
  for (int32_t t = 0; t < kVocab; ++t) {
    by_token.insert(runner->ChosenToken(t, 7));
  }
  // 32 emittable ids; 64 draws of a good mix cover many of them.
  EXPECT_GT(by_position.size(), 10u);
  EXPECT_GT(by_token.size(), 10u);
}

TEST_F(SimRunnerTest, OutputDoesNotDependOnBatchingOrPrefixCaching) {
  auto runner = MakeRunner();
  const std::vector<int32_t> prompt = {4, 8, 15, 16, 23, 42, 2, 9, 30};
  // Alone, whole prompt in one chunk, every row's logits.
  TestBatch alone;
  alone.Add(prompt, 9, {0, 1, 2}, /*all_rows=*/true);
  const std::vector<int32_t> reference = Picks(*runner, alone);

  // Behind other sequences, in other blocks.
  TestBatch crowded;
  crowded.Add({1, 2, 3}, 3, {9});
  crowded.Add({5}, 14, {10, 11, 12, 13});
  crowded.Add(prompt, 9, {20, 6, 31}, /*all_rows=*/true);
  std::vector<int32_t> picks = Picks(*runner, crowded);
  EXPECT_EQ(std::vector<int32_t>(picks.begin() + 2, picks.end()), reference);

  // Prefix cached: only the last 3 tokens are new.
  TestBatch cached;
  cached.Add({2, 9, 30}, 9, {0, 1, 5}, /*all_rows=*/true);
  EXPECT_EQ(Picks(*runner, cached), std::vector<int32_t>(reference.end() - 3, reference.end()));

  // Another runner (another engine) with the same emit list agrees.
  auto other = MakeRunner();
  EXPECT_EQ(Picks(*other, alone), reference);
}

TEST_F(SimRunnerTest, FakeClockSeesTheModeledDurations) {
  LatencyParams p;
  p.overhead_ms = 2;
  p.prefill_us_per_token = 100;
  p.decode_ms_per_seq = 1;
  p.attention_us_per_context_token = 0.01;  // 10 ns
  auto runner = MakeRunner(p);
  TestBatch prefill;
  prefill.Add({5, 6, 7, 8, 9}, 5, {3, 7});
  Picks(*runner, prefill);
  TestBatch mixed;
  mixed.Add({5, 6, 7, 8, 9}, 5, {3, 7});
  mixed.Add({11}, 9, {0, 1, 2});
  mixed.Add({12}, 2, {4});
  Picks(*runner, mixed);
  ASSERT_EQ(waits_.size(), 2u);
  EXPECT_EQ(waits_[0], nanoseconds(2'000'000 + 5 * 100'000 + 5 * 10));
  EXPECT_EQ(waits_[1], nanoseconds(2'000'000 + 5 * 100'000 + 2 * 1'000'000 + 16 * 10));
}

TEST_F(SimRunnerTest, SlidingWindowSkipsDroppedBlocksAndChargesTheWindow) {
  LatencyParams p = LatencyParams::Zero();
  p.attention_us_per_context_token = 0.01;  // 10 ns
  engine::RunnerLimits limits = Limits();
  limits.sliding_window = 6;
  auto runner = SimRunner::Create(limits, p, EmitTokens(), std::make_unique<FakeClock>(&waits_));
  ASSERT_TRUE(runner.ok()) << runner.status();
  // A decode at position 12 sees 7..12, from block 1 on: block 0 was dropped.
  TestBatch decode;
  decode.Add({11}, 13, {engine::kNullBlock, 4, 5, 6});
  Picks(**runner, decode);
  // A chunk at positions 9..11: its first row sees 4..9, from block 1 on.
  TestBatch chunk;
  chunk.Add({1, 2, 3}, 12, {engine::kNullBlock, 4, 5});
  Picks(**runner, chunk);
  ASSERT_EQ(waits_.size(), 2u);
  EXPECT_EQ(waits_[0], nanoseconds(6 * 10));
  EXPECT_EQ(waits_[1], nanoseconds(8 * 10));
  // Block 1 holds position 7, which the decode still reads.
  TestBatch reads_dropped;
  reads_dropped.Add({11}, 13, {engine::kNullBlock, engine::kNullBlock, 5, 6});
  std::vector<float> logits(kVocab);
  EXPECT_EQ((*runner)->Execute(reads_dropped.View(), logits).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SimRunnerTest, ZeroLatencyWaitsNothing) {
  auto runner = MakeRunner(LatencyParams::Zero());
  TestBatch batch;
  batch.Add({5, 6, 7}, 3, {0});
  Picks(*runner, batch);
  ASSERT_EQ(waits_.size(), 1u);
  EXPECT_EQ(waits_[0], nanoseconds(0));
}

TEST_F(SimRunnerTest, RejectsBatchesTheRealRunnerCouldNotRun) {
  struct Case {
    const char* name;
    std::function<void(TestBatch&)> breaks;
    int64_t logits_rows_delta = 0;
  };
  const Case cases[] = {
      {"no tokens", [](TestBatch& b) { b = TestBatch(); }},
      {"over max tokens",
       [](TestBatch& b) { b.Add(std::vector<int32_t>(30, 3), 30, std::vector<int32_t>(8, 9)); }},
      {"positions size", [](TestBatch& b) { b.positions.pop_back(); }},
      {"slots size", [](TestBatch& b) { b.slots.push_back(0); }},
      {"over max logit rows",
       [](TestBatch& b) {
         b.Add(std::vector<int32_t>(15, 3), 15, {10, 11, 12, 13}, /*all_rows=*/true);
       }},
      {"logits span size", [](TestBatch&) {}, 1},
      {"logit row past the batch", [](TestBatch& b) { b.rows.back() = 100; }},
      {"negative logit row", [](TestBatch& b) { b.rows.back() = -1; }},
      {"token outside the vocabulary", [](TestBatch& b) { b.tokens[0] = kVocab; }},
      {"negative token", [](TestBatch& b) { b.tokens[0] = -5; }},
      {"slot outside the cache", [](TestBatch& b) { b.slots[0] = kNumBlocks * kBlockSize; }},
      {"block id outside the cache", [](TestBatch& b) { b.seqs[1].table[2] = kNumBlocks; }},
      {"negative block id", [](TestBatch& b) { b.seqs[0].table[0] = -1; }},
      {"block table too short", [](TestBatch& b) { b.seqs[1].table.pop_back(); }},
      {"rows past the batch", [](TestBatch& b) { b.attention[1].q_begin = 6; }},
      {"q_len over context", [](TestBatch& b) { b.attention[0].context_len = 4; }},
      {"position off its context", [](TestBatch& b) { b.positions[5] = 7; }},
      {"slot off its block table", [](TestBatch& b) { b.slots[2] = b.slots[2] + kBlockSize; }},
  };
  for (const Case& c : cases) {
    waits_.clear();
    auto runner = MakeRunner(LatencyParams());
    TestBatch batch;
    batch.Add({5, 6, 7, 8, 9}, 5, {3, 7});
    batch.Add({11}, 9, {0, 1, 2});
    c.breaks(batch);
    std::vector<float> logits(static_cast<size_t>(
        (static_cast<int64_t>(batch.rows.size()) + c.logits_rows_delta) * kVocab));
    absl::Status status = runner->Execute(batch.View(), logits);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << status;
    EXPECT_TRUE(waits_.empty()) << c.name << ": a rejected step is not charged";
  }
}

TEST(SimRunnerCreateTest, RejectsBadArguments) {
  auto create = [](engine::RunnerLimits limits, std::vector<int32_t> emit, bool clock = true) {
    return SimRunner::Create(limits, LatencyParams::Zero(), std::move(emit),
                             clock ? std::make_unique<SteadySimClock>() : nullptr)
        .status()
        .code();
  };
  EXPECT_EQ(create(Limits(), {1, 2}), absl::StatusCode::kOk);
  EXPECT_EQ(create(Limits(), {}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(Limits(), {1, kVocab}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(Limits(), {-1}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(Limits(), {1}, /*clock=*/false), absl::StatusCode::kInvalidArgument);
  for (const auto& breaks : std::vector<std::function<void(engine::RunnerLimits&)>>{
           [](engine::RunnerLimits& l) { l.vocab_size = 0; },
           [](engine::RunnerLimits& l) { l.max_num_batched_tokens = 0; },
           [](engine::RunnerLimits& l) { l.max_logit_rows = 0; },
           [](engine::RunnerLimits& l) { l.num_kv_blocks = 0; },
           [](engine::RunnerLimits& l) { l.block_size = -4; }}) {
    engine::RunnerLimits limits = Limits();
    breaks(limits);
    EXPECT_EQ(create(limits, {1}), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace switchyard::sim
