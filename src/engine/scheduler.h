// The continuous-batching scheduler: one call plans one engine step, following vLLM's V1
// Scheduler.schedule() (vllm/v1/core/sched/scheduler.py). There is no prefill or decode
// phase: every sequence has num_computed_tokens and num_tokens, and a step gives each
// scheduled sequence some new tokens so the first catches up with the second.
//
//  1. Running sequences first, in running order, under a token budget of
//     max_num_batched_tokens: each gets min(remaining, long_prefill_token_threshold if set,
//     budget) tokens (decode = 1, a prefill chunk otherwise).
//  2. When the KV cache cannot hold a running sequence's new tokens, running sequences are
//     preempted by recompute (all their blocks freed, computed tokens back to 0) until it
//     fits: the last running one under FCFS, the max by (priority, arrival) under the
//     priority policy (which may be one already scheduled this step: its tokens and blocks
//     are handed back). Preempting the sequence itself ends the running pass.
//  3. Only when nothing was preempted, waiting sequences are admitted in queue order
//     (FCFS) or by (priority, arrival), while fewer than max_num_seqs run and budget
//     remains. Each starts after its prefix-cache hit (none for a sequence that skips
//     cache reads). The first that does not fit stops admission (no overtaking).
//  Prompt logprobs: a chunk covering prompt positions whose logits are wanted is cut so
//  that those positions fit the step's max_prompt_logit_rows (shared, in the order above);
//  a sequence with no row left gets no tokens this step.
//
// Block counts are table lengths: a sliding-window sequence's table keeps null entries for
// the blocks the KV cache manager released after earlier steps (those are already free),
// and an admission touches only the hit blocks its window reads.
//
// Schedule is a pure function of the state and the budget: it reads the KV cache through
// the const KvCapacityOracle and tracks, in its own locals, the blocks its earlier choices
// in the same step consume or free. The engine loop then commits the plan (ApplyPlan in
// step_apply.h). Called on the engine loop thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "engine/kv_cache_manager.h"

namespace switchyard::engine {

enum class SchedulingPolicy {
  kFcfs,
  // Lower value first; ties by arrival (vLLM's (priority, arrival_time) ordering).
  kPriority,
};

struct SchedulerBudget {
  int32_t max_num_batched_tokens = 2048;  // vLLM's DEFAULT_MAX_NUM_BATCHED_TOKENS
  int32_t max_num_seqs = 128;             // vLLM's DEFAULT_MAX_NUM_SEQS
  // Caps one sequence's tokens per step when positive, so long prompts share the step.
  int32_t long_prefill_token_threshold = 0;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Logit rows one step may spend on prompt positions (prompt logprobs), besides the one
  // sample row of each of at most max_num_seqs sequences.
  int32_t max_prompt_logit_rows = 0;
};

// What the scheduler reads about one sequence. Views into the engine's sequence table,
// valid for one Schedule call.
struct SeqView {
  SeqId id = 0;
  // Arrival order; smaller arrived earlier. Unique per sequence.
  int64_t arrival = 0;
  int32_t priority = 0;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  // Tokens whose KV is in the cache (prefix hit included). 0 for waiting sequences.
  int32_t num_computed_tokens = 0;
  // Prompt followed by outputs, num_tokens() of them; the prefix probe hashes them.
  std::span<const int32_t> tokens;
  const BlockHashExtras* extras = nullptr;
  // Positions [prompt_logits_begin, prompt_logits_end) still need their logits (prompt
  // logprobs); empty for most sequences.
  int32_t prompt_logits_begin = 0;
  int32_t prompt_logits_end = 0;
  // Never starts from the prefix cache (vLLM's skip_reading_prefix_cache).
  bool skip_prefix_cache = false;

  int32_t num_tokens() const { return num_prompt_tokens + num_output_tokens; }
};

// The cached prefix a waiting sequence would start from.
struct PrefixProbe {
  // Full blocks, kNullBlock for those the sliding window skips (never touched); never
  // covers the sequence's last token.
  std::vector<BlockId> blocks;
  int32_t num_tokens = 0;
};

// Read-only view of the KV cache the scheduler plans against.
class KvCapacityOracle {
 public:
  virtual ~KvCapacityOracle() = default;
  virtual int32_t block_size() const = 0;
  virtual int32_t num_free_blocks() const = 0;
  // The sequence's block table (kNullBlock for released blocks); empty for one that holds
  // none (or is unknown).
  virtual std::span<const BlockId> block_table(SeqId seq) const = 0;
  virtual int32_t ref_count(BlockId block) const = 0;
  // What KvCacheManager::GetComputedBlocks would return now, without its side effects.
  virtual PrefixProbe ProbePrefix(const SeqView& seq) const = 0;
};

struct SchedulerState {
  // In running order (admission order; preemption under FCFS takes the last).
  std::span<const SeqView> running;
  // In queue order; preempted sequences sit at the front. Sorted by (priority, arrival)
  // inside Schedule under the priority policy.
  std::span<const SeqView> waiting;
  const KvCapacityOracle* kv = nullptr;
};

// One sequence's work in the step.
struct ScheduledSeq {
  SeqId id = 0;
  // KV tokens before this step, the prefix hit included for admitted sequences.
  int32_t num_computed_tokens = 0;
  // The step's new tokens (q_len); context_len = num_computed_tokens + num_new_tokens.
  int32_t num_new_tokens = 0;
  // Blocks the commit allocates (hit blocks excluded).
  int32_t num_new_blocks = 0;
  // Newly admitted from waiting this step; prefix_hit_tokens is its cache hit.
  bool admitted = false;
  int32_t prefix_hit_tokens = 0;
  // The step reaches the sequence's last known token, so its logits are sampled.
  bool samples = false;
  // Prompt positions [prompt_logits_begin, + num_prompt_logits) of this step whose logits
  // are returned besides the sample row.
  int32_t prompt_logits_begin = 0;
  int32_t num_prompt_logits = 0;

  int32_t context_len() const { return num_computed_tokens + num_new_tokens; }
};

struct StepPlan {
  // Running sequences (in running order), then admitted ones (in admission order): the
  // order ApplyPlan commits and the forward batch lays rows out in.
  std::vector<ScheduledSeq> scheduled;
  // In preemption order.
  std::vector<SeqId> preempted;
  int32_t num_scheduled_tokens = 0;
  // Free blocks once the plan is committed, as planned (a lower bound; see ApplyPlan).
  int32_t num_free_blocks_after = 0;
};

// REQUIRES: state.kv != nullptr; budget.max_num_batched_tokens > 0,
// budget.max_num_seqs > 0; sequence ids unique across running and waiting; every running
// sequence holds blocks for its num_computed_tokens.
StepPlan Schedule(const SchedulerState& state, const SchedulerBudget& budget);

// The oracle over a real KvCacheManager. Probes (ProbeComputedBlocks) hash with a private
// copy of the manager's hasher, so they leave the manager untouched.
// Not owned: `manager` must outlive the oracle. Engine loop thread only.
class KvCacheOracle final : public KvCapacityOracle {
 public:
  explicit KvCacheOracle(const KvCacheManager& manager)
      : manager_(manager), hasher_(manager.hasher()) {}

  int32_t block_size() const override { return manager_.block_size(); }
  int32_t num_free_blocks() const override { return manager_.pool().num_free_blocks(); }
  std::span<const BlockId> block_table(SeqId seq) const override;
  int32_t ref_count(BlockId block) const override { return manager_.pool().ref_count(block); }
  PrefixProbe ProbePrefix(const SeqView& seq) const override;

 private:
  const KvCacheManager& manager_;
  // Hashing scratch only; probing is logically const.
  mutable BlockHasher hasher_;
};

}  // namespace switchyard::engine
