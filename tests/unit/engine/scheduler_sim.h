// A step-by-step simulation for scheduler tests: a request script drives the real
// KvCacheManager, SequenceTable, Schedule and ApplyPlan, with a fake model step that
// computes every scheduled token and samples one token per sequence that reaches its end
// (and, as the engine does after a step, releases the blocks a sliding window skips).
// Every step checks the invariants that must hold whatever the script, among them that a
// prompt-logprobs request gets the logits of every prompt position but the last exactly
// once, in order, within max_prompt_logit_rows per step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence_table.h"
#include "engine/step_apply.h"

namespace switchyard::engine::testing_sim {

struct Request {
  SeqId id = 0;
  int32_t arrival_step = 0;
  int32_t prompt_len = 1;
  int32_t max_tokens = 1;
  int32_t priority = 0;
  // The first `shared_prefix` prompt tokens come from one stem common to all requests.
  int32_t shared_prefix = 0;
  // Wants the logits of its prompt positions (and so skips prefix-cache reads).
  bool prompt_logprobs = false;
};

// What one step did: tokens per scheduled sequence (as committed), preemptions, prefix
// hits of admissions, and every request finished so far.
struct StepRecord {
  std::map<SeqId, int32_t> scheduled;
  std::set<SeqId> preempted;
  std::map<SeqId, int32_t> hits;
  std::set<SeqId> finished;
};

inline std::string ToString(const StepRecord& r) {
  return fmt::format("scheduled {} preempted {} hits {} finished {}", r.scheduled, r.preempted,
                     r.hits, r.finished);
}

class Sim {
 public:
  Sim(int32_t num_blocks, int32_t block_size, SchedulerBudget budget, std::vector<Request> script,
      bool caching = true, int32_t sliding_window = 0)
      : budget_(budget), script_(std::move(script)) {
    KvCacheOptions options;
    options.num_blocks = num_blocks;
    options.block_size = block_size;
    options.enable_prefix_caching = caching;
    options.hash_seed = "0";
    options.sliding_window = sliding_window;
    auto kv = KvCacheManager::Create(options);
    EXPECT_TRUE(kv.ok()) << kv.status();
    kv_ = std::move(*kv);
    oracle_ = std::make_unique<KvCacheOracle>(*kv_);
    for (const Request& r : script_)
      requests_[r.id] = r;
  }

  bool Done() const { return finished_.size() == script_.size(); }
  int32_t step() const { return step_; }
  const KvCacheManager& kv() const { return *kv_; }
  const SequenceTable& table() const { return table_; }

  // Plans the current step without committing it.
  StepPlan PlanOnly() { return Schedule(table_.View(*oracle_), budget_); }

  StepRecord Step() {
    for (const Request& r : script_) {
      if (r.arrival_step == step_)
        AddRequest(r);
    }
    StepRecord record;
    const StepPlan plan = Schedule(table_.View(*oracle_), budget_);
    CheckPlan(plan);
    auto committed = ApplyPlan(plan, &table_, kv_.get());
    EXPECT_TRUE(committed.ok()) << committed.status();
    if (!committed.ok())
      return record;
    EXPECT_GE(kv_->pool().num_free_blocks(), plan.num_free_blocks_after);
    record.preempted.insert(plan.preempted.begin(), plan.preempted.end());
    for (const ScheduledSeq& s : *committed) {
      record.scheduled[s.id] = s.num_new_tokens;
      if (s.admitted)
        record.hits[s.id] = s.prefix_hit_tokens;
      CheckPromptLogits(s);
    }
    CheckState();
    // The fake model step.
    for (const ScheduledSeq& s : *committed) {
      kv_->ReleaseSkippedBlocks(s.id);
      CheckWindow(s.id);
    }
    for (const ScheduledSeq& s : *committed) {
      if (!s.samples)
        continue;
      const Sequence* seq = table_.Find(s.id);
      EXPECT_TRUE(table_.AppendToken(s.id, 7 * seq->num_tokens() + 1).ok());
      if (seq->num_output_tokens() >= requests_.at(s.id).max_tokens) {
        if (requests_.at(s.id).prompt_logprobs) {
          EXPECT_EQ(prompt_logits_done_[s.id], requests_.at(s.id).prompt_len - 1) << s.id;
        }
        EXPECT_TRUE(table_.Finish(s.id, kv_.get()).ok());
        finished_.insert(s.id);
      }
    }
    record.finished = finished_;
    ++step_;
    return record;
  }

 private:
  void AddRequest(const Request& r) {
    Sequence seq;
    seq.id = r.id;
    seq.priority = r.priority;
    seq.num_prompt_tokens = r.prompt_len;
    for (int32_t i = 0; i < r.prompt_len; ++i)
      seq.tokens.push_back(i < r.shared_prefix ? 1000 + i : static_cast<int32_t>(r.id) * 10000 + i);
    if (r.prompt_logprobs) {
      seq.prompt_logits_end = r.prompt_len - 1;
      seq.skip_prefix_cache = true;
    }
    EXPECT_TRUE(table_.Add(std::move(seq)).ok());
  }

  // The committed step returns the logits of exactly the wanted positions it computed.
  void CheckPromptLogits(const ScheduledSeq& s) {
    const Request& r = requests_.at(s.id);
    if (!r.prompt_logprobs) {
      EXPECT_EQ(s.num_prompt_logits, 0) << s.id;
      return;
    }
    if (s.admitted) {
      EXPECT_EQ(s.prefix_hit_tokens, 0) << s.id;
    }
    int32_t& done = prompt_logits_done_[s.id];
    const int32_t want = std::max(
        0, std::min(s.context_len(), r.prompt_len - 1) - std::max(done, s.num_computed_tokens));
    EXPECT_EQ(s.num_prompt_logits, want) << s.id;
    if (s.num_prompt_logits > 0) {
      EXPECT_EQ(s.prompt_logits_begin, done) << s.id;
      EXPECT_GE(s.prompt_logits_begin, s.num_computed_tokens) << s.id;
      done += s.num_prompt_logits;
    }
  }

  void CheckPlan(const StepPlan& plan) {
    int32_t total = 0;
    int32_t prompt_rows = 0;
    std::set<SeqId> ids;
    for (const ScheduledSeq& s : plan.scheduled) {
      prompt_rows += s.num_prompt_logits;
      EXPECT_GE(s.num_new_tokens, 1) << s.id;
      if (budget_.long_prefill_token_threshold > 0) {
        EXPECT_LE(s.num_new_tokens, budget_.long_prefill_token_threshold) << s.id;
      }
      EXPECT_TRUE(ids.insert(s.id).second) << "scheduled twice: " << s.id;
      total += s.num_new_tokens;
    }
    for (SeqId id : plan.preempted)
      EXPECT_FALSE(ids.contains(id)) << "scheduled and preempted: " << id;
    EXPECT_EQ(total, plan.num_scheduled_tokens);
    EXPECT_LE(total, budget_.max_num_batched_tokens);
    EXPECT_LE(prompt_rows, budget_.max_prompt_logit_rows);
    EXPECT_GE(plan.num_free_blocks_after, 0);
  }

  // After a step, a sequence holds exactly the blocks from its next position's window on:
  // those wholly before it are null, and one sequence never holds more than
  // MaxBlocksPerSequence.
  void CheckWindow(SeqId id) {
    const int32_t window = kv_->sliding_window();
    const int32_t bs = kv_->block_size();
    const std::span<const BlockId> table = kv_->block_table(id);
    const int32_t first_read = std::max(0, kv_->num_tokens(id) - (window > 0 ? window - 1 : 0));
    for (size_t i = 0; i < table.size(); ++i) {
      const bool skipped = window > 0 && static_cast<int32_t>(i + 1) * bs <= first_read;
      EXPECT_EQ(table[i] == kNullBlock, skipped) << id << " block " << i;
    }
    const auto held =
        std::count_if(table.begin(), table.end(), [](BlockId b) { return b != kNullBlock; });
    EXPECT_LE(held,
              MaxBlocksPerSequence(kv_->num_tokens(id), budget_.max_num_batched_tokens, window, bs))
        << id;
  }

  void CheckState() {
    EXPECT_LE(table_.running().size(), static_cast<size_t>(budget_.max_num_seqs));
    std::set<SeqId> seen;
    for (SeqId id : table_.running()) {
      EXPECT_TRUE(seen.insert(id).second) << id;
      const Sequence* seq = table_.Find(id);
      ASSERT_NE(seq, nullptr);
      EXPECT_TRUE(seq->running);
      ASSERT_TRUE(kv_->HasSequence(id));
      EXPECT_EQ(kv_->num_tokens(id), seq->num_computed_tokens) << id;
      EXPECT_GE(static_cast<int64_t>(kv_->block_table(id).size()) * kv_->block_size(),
                seq->num_computed_tokens)
          << id;
    }
    for (SeqId id : table_.waiting()) {
      EXPECT_TRUE(seen.insert(id).second) << "both running and waiting: " << id;
      const Sequence* seq = table_.Find(id);
      ASSERT_NE(seq, nullptr);
      EXPECT_FALSE(seq->running);
      EXPECT_EQ(seq->num_computed_tokens, 0);
      if (kv_->HasSequence(id)) {
        EXPECT_TRUE(kv_->block_table(id).empty()) << id;
      }
    }
    EXPECT_EQ(seen.size(), table_.size());
  }

  SchedulerBudget budget_;
  std::vector<Request> script_;
  std::map<SeqId, Request> requests_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<KvCacheOracle> oracle_;
  SequenceTable table_;
  std::set<SeqId> finished_;
  // Prompt positions whose logits each prompt-logprobs request got so far.
  std::map<SeqId, int32_t> prompt_logits_done_;
  int32_t step_ = 0;
};

}  // namespace switchyard::engine::testing_sim
