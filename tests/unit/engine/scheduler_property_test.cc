// Random request scripts against the real KV cache manager (scheduler_sim.h checks the
// per-step invariants: budget and seat limits, no sequence both running and waiting, every
// running sequence's blocks cover its computed tokens, the planned free-block count is a
// lower bound). On top: Schedule is pure (same plan twice, no KV change), and every
// request finishes when each alone fits in the cache, which under a sliding window may
// hold fewer blocks than a request's length.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "engine/scheduler.h"
#include "scheduler_sim.h"

namespace switchyard::engine {
namespace {

using testing_sim::Request;
using testing_sim::Sim;

bool SamePlan(const StepPlan& a, const StepPlan& b) {
  if (a.preempted != b.preempted || a.num_scheduled_tokens != b.num_scheduled_tokens ||
      a.num_free_blocks_after != b.num_free_blocks_after ||
      a.scheduled.size() != b.scheduled.size()) {
    return false;
  }
  for (size_t i = 0; i < a.scheduled.size(); ++i) {
    const ScheduledSeq& x = a.scheduled[i];
    const ScheduledSeq& y = b.scheduled[i];
    if (x.id != y.id || x.num_computed_tokens != y.num_computed_tokens ||
        x.num_new_tokens != y.num_new_tokens || x.num_new_blocks != y.num_new_blocks ||
        x.admitted != y.admitted || x.prefix_hit_tokens != y.prefix_hit_tokens ||
        x.samples != y.samples || x.prompt_logits_begin != y.prompt_logits_begin ||
        x.num_prompt_logits != y.num_prompt_logits) {
      return false;
    }
  }
  return true;
}

TEST(SchedulerPropertyTest, RandomScriptsKeepInvariantsAndFinish) {
  constexpr int kScripts = 300;
  constexpr int kMaxSteps = 20000;
  // The scripts must reach the interesting paths, not only pass.
  int64_t num_preemptions = 0;
  int64_t num_hit_admissions = 0;
  int64_t num_long_requests = 0;  // longer than the cache holds (sliding window)
  for (int script_index = 0; script_index < kScripts; ++script_index) {
    std::mt19937_64 rng(script_index);
    auto uniform = [&](int32_t lo, int32_t hi) {
      return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    };
    const int32_t block_size = std::vector<int32_t>{1, 2, 4, 8}[uniform(0, 3)];
    const int32_t num_blocks = uniform(2, 40);
    SchedulerBudget budget;
    budget.max_num_batched_tokens = uniform(1, 64);
    budget.max_num_seqs = uniform(1, 8);
    budget.long_prefill_token_threshold = uniform(0, 1) == 0 ? 0 : uniform(1, 16);
    budget.policy = uniform(0, 1) == 0 ? SchedulingPolicy::kFcfs : SchedulingPolicy::kPriority;
    // Prompt logprobs draw from their own generator, so the scripts above stay as they were.
    std::mt19937_64 logprobs_rng(1000000 + script_index);
    budget.max_prompt_logit_rows = std::uniform_int_distribution<int32_t>(1, 12)(logprobs_rng);
    // A quarter of the scripts run a sliding window, drawn from its own generator too.
    std::mt19937_64 window_rng(2000000 + script_index);
    const int32_t window = std::uniform_int_distribution<int32_t>(0, 3)(window_rng) == 0
                               ? std::uniform_int_distribution<int32_t>(1, 24)(window_rng)
                               : 0;
    // Every request alone fits: at full attention prompt + outputs need at most num_blocks
    // blocks; under a window, requests may be 4 times as long when their window and one
    // step still fit.
    int32_t max_len = num_blocks * block_size;
    if (window > 0 && MaxBlocksPerSequence(4 * max_len, budget.max_num_batched_tokens, window,
                                           block_size) <= num_blocks) {
      max_len *= 4;
    }
    std::vector<Request> script;
    const int32_t num_requests = uniform(1, 16);
    for (int32_t i = 0; i < num_requests; ++i) {
      Request r;
      r.id = i;
      r.arrival_step = uniform(0, 30);
      r.prompt_len = uniform(1, std::max(1, std::min(40, max_len - 1)));
      r.max_tokens = uniform(1, std::min(20, max_len - r.prompt_len));
      r.priority = uniform(0, 3);
      r.shared_prefix = uniform(0, 1) == 0 ? 0 : uniform(0, r.prompt_len);
      r.prompt_logprobs = std::uniform_int_distribution<int32_t>(0, 3)(logprobs_rng) == 0;
      num_long_requests += r.prompt_len + r.max_tokens > num_blocks * block_size ? 1 : 0;
      script.push_back(r);
    }
    SCOPED_TRACE(::testing::Message()
                 << "script " << script_index << " blocks " << num_blocks << "x" << block_size
                 << " budget " << budget.max_num_batched_tokens << "/" << budget.max_num_seqs
                 << " threshold " << budget.long_prefill_token_threshold << " priority "
                 << (budget.policy == SchedulingPolicy::kPriority) << " prompt logit rows "
                 << budget.max_prompt_logit_rows << " window " << window);
    Sim sim(num_blocks, block_size, budget, script, /*caching=*/uniform(0, 3) != 0, window);
    while (!sim.Done() && sim.step() < kMaxSteps) {
      const testing_sim::StepRecord record = sim.Step();
      if (testing::Test::HasFailure())
        return;
      num_preemptions += static_cast<int64_t>(record.preempted.size());
      for (const auto& [id, hit] : record.hits)
        num_hit_admissions += hit > 0 ? 1 : 0;
    }

    ASSERT_TRUE(sim.Done()) << "not finished after " << kMaxSteps << " steps";
    EXPECT_EQ(sim.kv().pool().num_free_blocks(), num_blocks);
  }
  EXPECT_GT(num_preemptions, kScripts);
  EXPECT_GT(num_hit_admissions, kScripts);
  EXPECT_GT(num_long_requests, 10);
  RecordProperty("preemptions", std::to_string(num_preemptions));
  RecordProperty("hit_admissions", std::to_string(num_hit_admissions));
}

TEST(SchedulerPropertyTest, ScheduleIsPure) {
  std::vector<Request> script;
  for (int32_t i = 0; i < 12; ++i) {
    script.push_back({.id = i,
                      .arrival_step = i % 4,
                      .prompt_len = 5 + 3 * i,
                      .max_tokens = 6,
                      .priority = i % 3,
                      .shared_prefix = 8});
  }
  const SchedulerBudget budget{
      .max_num_batched_tokens = 16, .max_num_seqs = 5, .policy = SchedulingPolicy::kPriority};
  Sim sim(12, 4, budget, script);
  while (!sim.Done() && sim.step() < 1000) {
    const PrefixCacheStats stats = sim.kv().prefix_cache_stats();
    const int32_t free_blocks = sim.kv().pool().num_free_blocks();
    const StepPlan first = sim.PlanOnly();
    const StepPlan second = sim.PlanOnly();
    EXPECT_TRUE(SamePlan(first, second)) << "step " << sim.step();
    EXPECT_EQ(sim.kv().prefix_cache_stats().queries, stats.queries);
    EXPECT_EQ(sim.kv().pool().num_free_blocks(), free_blocks);
    sim.Step();
    if (testing::Test::HasFailure())
      return;
  }
  EXPECT_TRUE(sim.Done());
}

}  // namespace
}  // namespace switchyard::engine
