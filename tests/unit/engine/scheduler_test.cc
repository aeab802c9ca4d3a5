// Table-driven scheduler simulations in the style of TensorRT-LLM's capacitySchedulerTest:
// a request script runs step by step against the real KV cache manager with a fake model
// step (scheduler_sim.h), and each table row gives, for a range of steps, the tokens every
// scheduled sequence gets, the preemptions, the prefix hits of admissions and the requests
// finished so far. Request ids double as names: A = 0, B = 1, and so on.
#include "engine/scheduler.h"

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "engine/step_apply.h"
#include "scheduler_sim.h"

namespace switchyard::engine {
namespace {

using testing_sim::Request;
using testing_sim::Sim;
using testing_sim::StepRecord;

constexpr SeqId A = 0, B = 1, C = 2, D = 3;

struct Expect {
  int32_t first_step;
  int32_t last_step;
  std::map<SeqId, int32_t> scheduled;
  std::set<SeqId> preempted;
  std::map<SeqId, int32_t> hits;
  std::set<SeqId> finished;
};

struct SimCase {
  std::string name;
  int32_t num_blocks;
  int32_t block_size;
  SchedulerBudget budget;
  std::vector<Request> script;
  std::vector<Expect> expect;  // must cover every step until all requests finish
};

void PrintTo(const SimCase& c, std::ostream* os) {
  *os << c.name;
}

SchedulerBudget Budget(int32_t tokens, int32_t seqs, int32_t threshold = 0,
                       SchedulingPolicy policy = SchedulingPolicy::kFcfs,
                       int32_t prompt_logit_rows = 0) {
  return SchedulerBudget{.max_num_batched_tokens = tokens,
                         .max_num_seqs = seqs,
                         .long_prefill_token_threshold = threshold,
                         .policy = policy,
                         .max_prompt_logit_rows = prompt_logit_rows};
}

std::vector<SimCase> Cases() {
  std::vector<SimCase> cases;
  // Budget 8: A's prompt is chunked 8 + 2, and B gets the rest of step 1's budget.
  cases.push_back(
      {"ChunkedPrefillSplitsBudget",
       64,
       4,
       Budget(8, 4),
       {{.id = A, .prompt_len = 10, .max_tokens = 3}, {.id = B, .prompt_len = 6, .max_tokens = 2}},
       {{0, 0, {{A, 8}}, {}, {{A, 0}}, {}},
        {1, 1, {{A, 2}, {B, 6}}, {}, {{B, 0}}, {}},
        {2, 2, {{A, 1}, {B, 1}}, {}, {}, {B}},
        {3, 3, {{A, 1}}, {}, {}, {A, B}}}});
  // The threshold caps A's chunks at 4 even though the budget has room.
  cases.push_back(
      {"LongPrefillThreshold",
       64,
       4,
       Budget(16, 4, /*threshold=*/4),
       {{.id = A, .prompt_len = 10, .max_tokens = 2}, {.id = B, .prompt_len = 3, .max_tokens = 2}},
       {{0, 0, {{A, 4}, {B, 3}}, {}, {{A, 0}, {B, 0}}, {}},
        {1, 1, {{A, 4}, {B, 1}}, {}, {}, {B}},
        {2, 2, {{A, 2}}, {}, {}, {B}},
        {3, 3, {{A, 1}}, {}, {}, {A, B}}}});
  // Two seats: C waits until A and B finish, then is admitted.
  cases.push_back({"MaxNumSeqsAndAdmissionAfterFinish",
                   64,
                   4,
                   Budget(100, 2),
                   {{.id = A, .prompt_len = 4, .max_tokens = 2},
                    {.id = B, .prompt_len = 4, .max_tokens = 2},
                    {.id = C, .prompt_len = 4, .max_tokens = 2}},
                   {{0, 0, {{A, 4}, {B, 4}}, {}, {{A, 0}, {B, 0}}, {}},
                    {1, 1, {{A, 1}, {B, 1}}, {}, {}, {A, B}},
                    {2, 2, {{C, 4}}, {}, {{C, 0}}, {A, B}},
                    {3, 3, {{C, 1}}, {}, {}, {A, B, C}}}});
  // Three blocks: at step 1 A and B each need a second block; FCFS preempts the last
  // running (B itself), whatever the priorities say. B's cached prompt block would be a hit, but
  // taking it out of the free queue costs a block too, so B waits until A finishes (A's block at
  // step 5 evicts it), then recomputes prompt + its one output token.
  cases.push_back({"PreemptionWhenBlocksRunOutAndRecovery",
                   3,
                   4,
                   Budget(100, 4),
                   {{.id = A, .prompt_len = 4, .max_tokens = 6, .priority = 1},
                    {.id = B, .prompt_len = 4, .max_tokens = 6}},
                   {{0, 0, {{A, 4}, {B, 4}}, {}, {{A, 0}, {B, 0}}, {}},
                    {1, 1, {{A, 1}}, {B}, {}, {}},
                    {2, 4, {{A, 1}}, {}, {}, {}},
                    {5, 5, {{A, 1}}, {}, {}, {A}},
                    {6, 6, {{B, 5}}, {}, {{B, 0}}, {A}},
                    {7, 9, {{B, 1}}, {}, {}, {A}},
                    {10, 10, {{B, 1}}, {}, {}, {A, B}}}});
  // Priority: B (priority 1) runs first; at step 2 A (priority 0) needs a block, and the
  // victim is B although B was already scheduled this step: its token is handed back.
  cases.push_back({"PriorityPreemptsScheduledLowerPriority",
                   3,
                   4,
                   Budget(100, 4, 0, SchedulingPolicy::kPriority),
                   {{.id = A, .arrival_step = 1, .prompt_len = 4, .max_tokens = 8},
                    {.id = B, .prompt_len = 4, .max_tokens = 8, .priority = 1}},
                   {{0, 0, {{B, 4}}, {}, {{B, 0}}, {}},
                    {1, 1, {{B, 1}, {A, 4}}, {}, {{A, 0}}, {}},
                    {2, 2, {{A, 1}}, {B}, {}, {}},
                    {3, 7, {{A, 1}}, {}, {}, {}},
                    {8, 8, {{A, 1}}, {}, {}, {A}},
                    {9, 9, {{B, 6}}, {}, {{B, 0}}, {A}},
                    {10, 13, {{B, 1}}, {}, {}, {A}},
                    {14, 14, {{B, 1}}, {}, {}, {A, B}}}});
  // One seat: admission follows (priority, arrival), not the queue order.
  cases.push_back({"PriorityAdmissionOrder",
                   64,
                   4,
                   Budget(100, 1, 0, SchedulingPolicy::kPriority),
                   {{.id = A, .prompt_len = 4, .max_tokens = 2, .priority = 2},
                    {.id = B, .prompt_len = 4, .max_tokens = 2, .priority = 0},
                    {.id = C, .prompt_len = 4, .max_tokens = 2, .priority = 0}},
                   {{0, 0, {{B, 4}}, {}, {{B, 0}}, {}},
                    {1, 1, {{B, 1}}, {}, {}, {B}},
                    {2, 2, {{C, 4}}, {}, {{C, 0}}, {B}},
                    {3, 3, {{C, 1}}, {}, {}, {B, C}},
                    {4, 4, {{A, 4}}, {}, {{A, 0}}, {B, C}},
                    {5, 5, {{A, 1}}, {}, {}, {A, B, C}}}});
  // B shares A's first two blocks and computes only its tail. C repeats A's prompt
  // exactly, yet its hit stops a block short: the last prompt token is always computed.
  // D extends A's prompt by one token and hits all three blocks.
  cases.push_back(
      {"PrefixHitsAndLastTokenRule",
       64,
       4,
       Budget(100, 4),
       {{.id = A, .prompt_len = 12, .max_tokens = 1, .shared_prefix = 12},
        {.id = B, .arrival_step = 2, .prompt_len = 14, .max_tokens = 1, .shared_prefix = 8},
        {.id = C, .arrival_step = 3, .prompt_len = 12, .max_tokens = 1, .shared_prefix = 12},
        {.id = D, .arrival_step = 4, .prompt_len = 13, .max_tokens = 1, .shared_prefix = 12}},
       {{0, 0, {{A, 12}}, {}, {{A, 0}}, {A}},
        {1, 1, {}, {}, {}, {A}},
        {2, 2, {{B, 6}}, {}, {{B, 8}}, {A, B}},
        {3, 3, {{C, 4}}, {}, {{C, 8}}, {A, B, C}},
        {4, 4, {{D, 1}}, {}, {{D, 12}}, {A, B, C, D}}}});
  // A and B arrive together with one prompt: Schedule probes no hit for B, but A's blocks
  // are published when A commits, so B starts from them and computes only what is left.
  cases.push_back({"HitPublishedEarlierInTheSameStep",
                   64,
                   4,
                   Budget(100, 4),
                   {{.id = A, .prompt_len = 12, .max_tokens = 1, .shared_prefix = 12},
                    {.id = B, .prompt_len = 12, .max_tokens = 1, .shared_prefix = 12}},
                   {{0, 0, {{A, 12}, {B, 4}}, {}, {{A, 0}, {B, 8}}, {A, B}}}});
  // A leaves two cached blocks, unreferenced, in a 4-block cache. B and C both hit them;
  // taking them out of the free queue is counted once, so both fit (1 new block each).
  cases.push_back(
      {"SharedFreeHitCountedOnce",
       4,
       4,
       Budget(100, 4),
       {{.id = A, .prompt_len = 9, .max_tokens = 1, .shared_prefix = 8},
        {.id = B, .arrival_step = 1, .prompt_len = 9, .max_tokens = 1, .shared_prefix = 8},
        {.id = C, .arrival_step = 1, .prompt_len = 9, .max_tokens = 1, .shared_prefix = 8}},
       {{0, 0, {{A, 9}}, {}, {{A, 0}}, {A}},
        {1, 1, {{B, 1}, {C, 1}}, {}, {{B, 8}, {C, 8}}, {A, B, C}}}});
  // Prompt logprobs: 4 rows a step for prompt positions. A's chunks stop where its rows run
  // out (positions 0-3, 4-7, then 8 and the sampled 9); B, with no prompt logits, takes the
  // rest of the token budget.
  cases.push_back({"PromptLogitRowsCutChunks",
                   64,
                   4,
                   Budget(100, 4, 0, SchedulingPolicy::kFcfs, /*prompt_logit_rows=*/4),
                   {{.id = A, .prompt_len = 10, .max_tokens = 1, .prompt_logprobs = true},
                    {.id = B, .prompt_len = 6, .max_tokens = 2}},
                   {{0, 0, {{A, 4}, {B, 6}}, {}, {{A, 0}, {B, 0}}, {}},
                    {1, 1, {{A, 4}, {B, 1}}, {}, {}, {B}},
                    {2, 2, {{A, 2}}, {}, {}, {A, B}}}});
  // The rows are shared in scheduling order: A (running first) takes all 3, so B, admitted
  // after it, gets only the tokens before its first wanted position, i.e. none, and waits.
  cases.push_back({"PromptLogitRowsSharedInOrder",
                   64,
                   4,
                   Budget(100, 4, 0, SchedulingPolicy::kFcfs, /*prompt_logit_rows=*/3),
                   {{.id = A, .prompt_len = 7, .max_tokens = 1, .prompt_logprobs = true},
                    {.id = B, .prompt_len = 3, .max_tokens = 1, .prompt_logprobs = true}},
                   {{0, 0, {{A, 3}}, {}, {{A, 0}}, {}},
                    {1, 1, {{A, 3}}, {}, {}, {}},
                    {2, 2, {{A, 1}, {B, 3}}, {}, {{B, 0}}, {A, B}}}});
  // A prompt-logprobs request never reads the prefix cache (vLLM's skip_reading_prefix_cache):
  // B repeats A's prompt yet computes all of it. Its blocks are still published: C hits them.
  cases.push_back(
      {"PromptLogprobsSkipPrefixCacheReads",
       64,
       4,
       Budget(100, 4, 0, SchedulingPolicy::kFcfs, /*prompt_logit_rows=*/16),
       {{.id = A, .prompt_len = 12, .max_tokens = 1, .shared_prefix = 12},
        {.id = B,
         .arrival_step = 1,
         .prompt_len = 12,
         .max_tokens = 1,
         .shared_prefix = 12,
         .prompt_logprobs = true},
        {.id = C, .arrival_step = 2, .prompt_len = 12, .max_tokens = 1, .shared_prefix = 12}},
       {{0, 0, {{A, 12}}, {}, {{A, 0}}, {A}},
        {1, 1, {{B, 12}}, {}, {{B, 0}}, {A, B}},
        {2, 2, {{C, 4}}, {}, {{C, 8}}, {A, B, C}}}});
  return cases;
}

class SchedulerSimTest : public testing::TestWithParam<SimCase> {};

TEST_P(SchedulerSimTest, FollowsTable) {
  const SimCase& c = GetParam();
  Sim sim(c.num_blocks, c.block_size, c.budget, c.script);
  const int32_t last_step = c.expect.back().last_step;
  for (int32_t step = 0; step <= last_step; ++step) {
    const StepRecord got = sim.Step();
    const Expect* want = nullptr;
    for (const Expect& e : c.expect) {
      if (e.first_step <= step && step <= e.last_step)
        want = &e;
    }
    ASSERT_NE(want, nullptr) << "no row for step " << step;
    SCOPED_TRACE(fmt::format("step {}: {}", step, testing_sim::ToString(got)));
    EXPECT_EQ(got.scheduled, want->scheduled);
    EXPECT_EQ(got.preempted, want->preempted);
    EXPECT_EQ(got.hits, want->hits);
    EXPECT_EQ(got.finished, want->finished);
    if (testing::Test::HasFailure())
      return;
  }
  EXPECT_TRUE(sim.Done());
}

INSTANTIATE_TEST_SUITE_P(Tables, SchedulerSimTest, testing::ValuesIn(Cases()),
                         [](const testing::TestParamInfo<SimCase>& param) {
                           return param.param.name;
                         });

// Under a sliding window a sequence holds its window's blocks, not its length's: two
// 40-token requests (10 blocks each at full attention) run side by side in 8 blocks of 4,
// without a preemption.
TEST(SchedulerWindowTest, LongRequestsShareAPoolHoldingTheirWindows) {
  constexpr int32_t kWindow = 6;
  std::vector<Request> script(2);
  for (SeqId id : {A, B}) {
    script[id].id = id;
    script[id].prompt_len = 10;
    script[id].max_tokens = 30;
  }
  Sim sim(8, 4, Budget(16, 4), script, /*caching=*/true, kWindow);
  int32_t steps_with_both = 0;
  while (!sim.Done() && sim.step() < 100) {
    const StepRecord record = sim.Step();
    EXPECT_TRUE(record.preempted.empty()) << "step " << sim.step();
    steps_with_both += record.scheduled.size() == 2 ? 1 : 0;
    if (testing::Test::HasFailure())
      return;
  }
  EXPECT_TRUE(sim.Done());
  EXPECT_GE(steps_with_both, 29);
  EXPECT_EQ(sim.kv().pool().num_free_blocks(), 8);
}

}  // namespace
}  // namespace switchyard::engine
