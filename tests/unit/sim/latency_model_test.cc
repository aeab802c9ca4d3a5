#include "sim/latency_model.h"

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::sim {
namespace {

using std::chrono::nanoseconds;

runtime::AttentionSequence Seq(int64_t q_len, int64_t context_len) {
  runtime::AttentionSequence s;
  s.q_len = q_len;
  s.context_len = context_len;
  return s;
}

LatencyParams Params(double overhead_ms, double prefill_us, double decode_ms, double attn_us) {
  LatencyParams p;
  p.overhead_ms = overhead_ms;
  p.prefill_us_per_token = prefill_us;
  p.decode_ms_per_seq = decode_ms;
  p.attention_us_per_context_token = attn_us;
  return p;
}

TEST(LatencyModelTest, ShapeSortsPrefillFromDecode) {
  struct Case {
    const char* name;
    std::vector<runtime::AttentionSequence> seqs;
    int64_t prefill_tokens, decode_seqs, context_tokens;
  } cases[] = {
      {"empty", {}, 0, 0, 0},
      {"first_prefill_chunk", {Seq(8, 8)}, 8, 0, 8},
      {"later_prefill_chunk", {Seq(4, 12)}, 4, 0, 12},
      {"one_token_prompt_is_prefill", {Seq(1, 1)}, 1, 0, 1},
      {"decode_rows", {Seq(1, 9), Seq(1, 30)}, 0, 2, 39},
      // A prompt served from the prefix cache but its last token: q_len 1 after a cached
      // context, charged as a decode.
      {"cached_prompt_tail", {Seq(1, 17)}, 0, 1, 17},
      {"mixed", {Seq(1, 9), Seq(6, 6), Seq(1, 2), Seq(3, 10)}, 9, 2, 27},
  };
  for (const Case& c : cases) {
    const StepShape shape = ShapeOf(c.seqs, 0);
    EXPECT_EQ(shape.prefill_tokens, c.prefill_tokens) << c.name;
    EXPECT_EQ(shape.decode_seqs, c.decode_seqs) << c.name;
    EXPECT_EQ(shape.context_tokens, c.context_tokens) << c.name;
  }
}

TEST(LatencyModelTest, SlidingWindowChargesTheKvPositionsRead) {
  // Window 24: a decode reads min(context, 24) positions; a chunk of q_len new tokens reads
  // min(context, q_len - 1 + 24), from its first row's window on.
  const StepShape shape = ShapeOf(std::vector{Seq(1, 10), Seq(1, 24), Seq(1, 25), Seq(1, 500),
                                              Seq(16, 16), Seq(16, 39), Seq(16, 40), Seq(16, 200)},
                                  24);
  EXPECT_EQ(shape.context_tokens, 10 + 24 + 24 + 24 + 16 + 39 + 39 + 39);
  EXPECT_EQ(shape.decode_seqs, 4);
  EXPECT_EQ(shape.prefill_tokens, 64);
  EXPECT_EQ(ShapeOf(std::vector{Seq(1, 500)}, 0).context_tokens, 500);
}

TEST(LatencyModelTest, LatencyIsTheSumOfTheFourTerms) {
  const LatencyParams p = Params(2, 150, 1.5, 0.01);  // attention: 10 ns per context token
  EXPECT_EQ(StepLatency(p, StepShape{}), nanoseconds(2'000'000));
  // Prefill chunk of 100 tokens: 2 ms + 100 * 150 us + 100 * 10 ns.
  EXPECT_EQ(StepLatency(p, ShapeOf(std::vector{Seq(100, 100)}, 0)),
            nanoseconds(2'000'000 + 15'000'000 + 1'000));
  // Four decode rows at contexts 10, 20, 30, 40: 2 ms + 4 * 1.5 ms + 100 * 10 ns.
  EXPECT_EQ(StepLatency(p, ShapeOf(std::vector{Seq(1, 10), Seq(1, 20), Seq(1, 30), Seq(1, 40)}, 0)),
            nanoseconds(2'000'000 + 6'000'000 + 1'000));
  // Mixed: a 16-token chunk continuing a 32-token context, plus two decodes.
  EXPECT_EQ(StepLatency(p, ShapeOf(std::vector{Seq(16, 48), Seq(1, 5), Seq(1, 7)}, 0)),
            nanoseconds(2'000'000 + 16 * 150'000 + 2 * 1'500'000 + 60 * 10));
}

TEST(LatencyModelTest, ZeroChargesNothing) {
  EXPECT_EQ(StepLatency(LatencyParams::Zero(), StepShape{100, 50, 100000}), nanoseconds(0));
}

TEST(LatencyModelTest, ParseOverridesTheDefaults) {
  const LatencyParams defaults;
  auto empty = ParseLatencyParams("");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->overhead_ms, defaults.overhead_ms);
  EXPECT_EQ(empty->prefill_us_per_token, defaults.prefill_us_per_token);

  auto some = ParseLatencyParams("overhead_ms=2,prefill_us_per_token=150.5");
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_EQ(some->overhead_ms, 2);
  EXPECT_EQ(some->prefill_us_per_token, 150.5);
  EXPECT_EQ(some->decode_ms_per_seq, defaults.decode_ms_per_seq);
  EXPECT_EQ(some->attention_us_per_context_token, defaults.attention_us_per_context_token);

  auto all = ParseLatencyParams(
      "attention_us_per_context_token=0.5,decode_ms_per_seq=3,overhead_ms=0,"
      "prefill_us_per_token=1e2");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->overhead_ms, 0);
  EXPECT_EQ(all->prefill_us_per_token, 100);
  EXPECT_EQ(all->decode_ms_per_seq, 3);
  EXPECT_EQ(all->attention_us_per_context_token, 0.5);
}

TEST(LatencyModelTest, ParseZero) {
  auto zero = ParseLatencyParams("zero");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(StepLatency(*zero, StepShape{10, 10, 10}), nanoseconds(0));
  auto zero_but_decode = ParseLatencyParams("zero,decode_ms_per_seq=3");
  ASSERT_TRUE(zero_but_decode.ok()) << zero_but_decode.status();
  EXPECT_EQ(StepLatency(*zero_but_decode, StepShape{10, 2, 10}), nanoseconds(6'000'000));
}

TEST(LatencyModelTest, ParseRejectsBadItems) {
  for (const char* spec :
       {"bogus=1", "overhead_ms", "overhead_ms=", "=3", "overhead_ms=abc", "overhead_ms=1x",
        "overhead_ms=-1", "overhead_ms=inf", "overhead_ms=nan", "overhead_ms=1,overhead_ms=2",
        "overhead_ms=1,", ",overhead_ms=1", "overhead_ms = 1", "Overhead_ms=1"}) {
    auto parsed = ParseLatencyParams(spec);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
  auto unknown = ParseLatencyParams("bogus=1");
  EXPECT_NE(std::string(unknown.status().message()).find("prefill_us_per_token"), std::string::npos)
      << "the error lists the known keys: " << unknown.status();
}

}  // namespace
}  // namespace switchyard::sim
