// ApplyPlan when the state moved under an admission between Schedule's probe and the
// commit: a sliding-window hit whose window moved onto other free cached blocks no longer
// fits, and the sequence waits instead of failing the step.
#include "engine/step_apply.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence_table.h"
#include "kv_cache_test_support.h"

namespace switchyard::engine {
namespace {

constexpr BlockId N = kNullBlock;
constexpr SeqId X = 1, V = 2, Y = 3;

Sequence Prompt(SeqId id, std::vector<int32_t> tokens) {
  Sequence seq;
  seq.id = id;
  seq.num_prompt_tokens = static_cast<int32_t>(tokens.size());
  seq.tokens = std::move(tokens);
  return seq;
}

TEST(ApplyPlanTest, AdmissionWhoseWindowHitMovedWaitsInsteadOfFailing) {
  // 5 blocks of 4, window 6: a hit needs the 2 blocks before its end. T0..T4 are the
  // blocks of the 20 tokens every sequence here starts with.
  KvCacheOptions options;
  options.num_blocks = 5;
  options.block_size = 4;
  options.sliding_window = 6;
  options.hash_seed = "0";
  auto created = KvCacheManager::Create(options);
  ASSERT_TRUE(created.ok());
  KvCacheManager& kv = **created;
  const std::vector<int32_t> shared = Iota(20, 100);
  SequenceTable table;

  // X computed all 20 (blocks 0-4 hold T0-T4) and dropped T0-T2; it decodes next.
  ASSERT_TRUE(table.Add(Prompt(X, shared)).ok());
  ASSERT_TRUE(kv.AddSequence(X, {}, std::nullopt).ok());
  auto x_plan = kv.Plan(X, shared, 20, {});
  ASSERT_TRUE(x_plan.ok());
  kv.Commit(*x_plan, shared);
  kv.ReleaseSkippedBlocks(X);
  ASSERT_TRUE(table.MoveToRunning(X).ok());
  table.SetComputedTokens(X, 20);
  ASSERT_TRUE(table.AppendToken(X, 7).ok());
  // V held T0 and T1 for a while, so they went back behind T2: the free queue is T2 T1 T0.
  ASSERT_TRUE(kv.AddSequence(V, {}, std::nullopt).ok());
  const std::vector<int32_t> v_tokens = Iota(9, 100);
  auto v_hit = kv.GetComputedBlocks(V, v_tokens);
  ASSERT_TRUE(v_hit.ok());
  auto v_plan = kv.Plan(V, v_tokens, 0, *v_hit);
  ASSERT_TRUE(v_plan.ok());
  kv.Commit(*v_plan, v_tokens);
  ASSERT_TRUE(kv.Free(V).ok());
  ASSERT_EQ(kv.pool().FreeQueue(), (std::vector<BlockId>{2, 1, 0}));

  // Y (17 tokens) probes a hit of T2 (free) and T3 (X's): 1 block from the free queue and
  // 1 new. X's new block takes 2 first, evicting T2, so Y's hit at commit is T0 T1: 2 from
  // the free queue and 1 new, one more than there is.
  ASSERT_TRUE(table.Add(Prompt(Y, Iota(17, 100))).ok());
  KvCacheOracle oracle(kv);
  const StepPlan plan = Schedule(table.View(oracle), SchedulerBudget{});
  ASSERT_EQ(plan.scheduled.size(), 2u);
  EXPECT_TRUE(plan.scheduled[1].admitted);
  EXPECT_EQ(plan.scheduled[1].prefix_hit_tokens, 16);
  auto committed = ApplyPlan(plan, &table, &kv);
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_EQ(committed->size(), 2u);
  EXPECT_EQ((*committed)[0].num_new_tokens, 1);
  EXPECT_EQ((*committed)[1].id, Y);
  EXPECT_EQ((*committed)[1].num_new_tokens, 0);
  EXPECT_FALSE((*committed)[1].admitted);
  EXPECT_EQ(table.waiting().front(), Y);
  EXPECT_TRUE(kv.block_table(Y).empty());
  EXPECT_EQ(kv.pool().num_free_blocks(), 2);

  // Once X is done, Y starts from T0 T1.
  kv.ReleaseSkippedBlocks(X);
  ASSERT_TRUE(table.Finish(X, &kv).ok());
  const StepPlan next = Schedule(table.View(oracle), SchedulerBudget{});
  ASSERT_EQ(next.scheduled.size(), 1u);
  committed = ApplyPlan(next, &table, &kv);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ((*committed)[0].prefix_hit_tokens, 8);
  EXPECT_EQ((*committed)[0].num_new_tokens, 9);
  EXPECT_EQ(table.Find(Y)->num_computed_tokens, 17);
  EXPECT_EQ(kv.block_table(Y)[0], 0);
  EXPECT_NE(kv.block_table(Y)[2], N);
}

}  // namespace
}  // namespace switchyard::engine
