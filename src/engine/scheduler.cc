#include "engine/scheduler.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "base/logging.h"

namespace switchyard::engine {
namespace {

int32_t CeilDiv(int64_t a, int32_t b) {
  return static_cast<int32_t>((a + b - 1) / b);
}

bool LowerPriority(const SeqView& a, const SeqView& b) {
  return std::tie(a.priority, a.arrival) < std::tie(b.priority, b.arrival);
}

// The KV cache as the step's earlier choices leave it: free blocks, references dropped by
// preemptions, and hit blocks already taken out of the free queue by admissions.
class CapacityTracker {
 public:
  explicit CapacityTracker(const KvCapacityOracle& kv)
      : kv_(kv), block_size_(kv.block_size()), free_(kv.num_free_blocks()) {}

  int32_t free() const { return free_; }
  int32_t block_size() const { return block_size_; }

  // Blocks a running sequence must add to cover `num_tokens_after` KV slots.
  int32_t NewBlocksFor(SeqId seq, int32_t num_tokens_after) const {
    const auto held = static_cast<int32_t>(kv_.block_table(seq).size());
    return std::max(0, CeilDiv(num_tokens_after, block_size_) - held);
  }

  void Take(int32_t n) { free_ -= n; }
  void Give(int32_t n) { free_ += n; }

  // Drops the sequence's references; blocks nobody else references become free (shared
  // prefix blocks stay taken until their last holder goes).
  void Release(SeqId seq) {
    for (BlockId block : kv_.block_table(seq)) {
      if (block != kNullBlock && kv_.ref_count(block) - ++released_[block] == 0)
        ++free_;
    }
  }

  // Hit blocks that would leave the free queue when touched, not yet counted this step.
  int32_t NumEvictableHits(std::span<const BlockId> hit) const {
    int32_t n = 0;
    for (BlockId block : hit) {
      if (block != kNullBlock && kv_.ref_count(block) == 0 && !touched_.contains(block))
        ++n;
    }
    return n;
  }
  void Touch(std::span<const BlockId> hit) {
    for (BlockId block : hit) {
      if (block != kNullBlock)
        touched_.insert(block);
    }
  }

 private:
  const KvCapacityOracle& kv_;
  const int32_t block_size_;
  int32_t free_;
  absl::flat_hash_map<BlockId, int32_t> released_;
  absl::flat_hash_set<BlockId> touched_;
};

int32_t ChunkSize(int32_t remaining, int32_t token_budget, const SchedulerBudget& budget) {
  int32_t n = remaining;
  if (budget.long_prefill_token_threshold > 0)
    n = std::min(n, budget.long_prefill_token_threshold);
  return std::min(n, token_budget);
}

// The prompt positions of a chunk whose logits are wanted: [begin, begin + rows).
struct PromptLogits {
  int32_t begin = 0;
  int32_t rows = 0;
};

// Cuts the chunk of `*n` tokens from `start` so that the positions it covers that want
// logits fit `rows_left`; returns those positions.
PromptLogits CutForPromptLogits(const SeqView& seq, int32_t start, int32_t rows_left, int32_t* n) {
  const int32_t begin = std::max(start, seq.prompt_logits_begin);
  if (begin >= seq.prompt_logits_end)
    return {};
  *n = std::min(*n, begin - start + rows_left);
  return {begin, std::max(0, std::min(start + *n, seq.prompt_logits_end) - begin)};
}

}  // namespace

StepPlan Schedule(const SchedulerState& state, const SchedulerBudget& budget) {
  SY_CHECK(state.kv != nullptr);
  SY_CHECK(budget.max_num_batched_tokens > 0 && budget.max_num_seqs > 0);
  CapacityTracker capacity(*state.kv);
  int32_t token_budget = budget.max_num_batched_tokens;
  int32_t prompt_rows = budget.max_prompt_logit_rows;
  StepPlan plan;

  // Running pass. `alive[i]` is false once running[i] is preempted; `slot[i]` is its entry
  // in plan.scheduled, or -1.
  const auto num_running = static_cast<int32_t>(state.running.size());
  std::vector<bool> alive(num_running, true);
  std::vector<int32_t> slot(num_running, -1);
  int32_t num_alive = num_running;
  auto pick_victim = [&]() {
    int32_t victim = -1;
    for (int32_t i = num_running - 1; i >= 0; --i) {
      if (!alive[i])
        continue;
      if (victim < 0) {
        victim = i;
        if (budget.policy == SchedulingPolicy::kFcfs)
          break;
      } else if (LowerPriority(state.running[victim], state.running[i])) {
        victim = i;
      }
    }
    return victim;
  };
  for (int32_t i = 0; i < num_running && token_budget > 0; ++i) {
    if (!alive[i])
      continue;
    const SeqView& seq = state.running[i];
    int32_t n = ChunkSize(seq.num_tokens() - seq.num_computed_tokens, token_budget, budget);
    const PromptLogits logits = CutForPromptLogits(seq, seq.num_computed_tokens, prompt_rows, &n);
    if (n <= 0)
      continue;
    const int32_t need = capacity.NewBlocksFor(seq.id, seq.num_computed_tokens + n);
    bool preempted_self = false;
    while (need > capacity.free()) {
      const int32_t victim = pick_victim();
      alive[victim] = false;
      --num_alive;
      if (slot[victim] >= 0) {
        ScheduledSeq& given_back = plan.scheduled[slot[victim]];
        token_budget += given_back.num_new_tokens;
        prompt_rows += given_back.num_prompt_logits;
        capacity.Give(given_back.num_new_blocks);
        given_back.num_new_tokens = 0;  // dropped below
      }
      capacity.Release(state.running[victim].id);
      plan.preempted.push_back(state.running[victim].id);
      if (victim == i) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self)
      break;
    capacity.Take(need);
    token_budget -= n;
    prompt_rows -= logits.rows;
    slot[i] = static_cast<int32_t>(plan.scheduled.size());
    plan.scheduled.push_back(ScheduledSeq{
        .id = seq.id,
        .num_computed_tokens = seq.num_computed_tokens,
        .num_new_tokens = n,
        .num_new_blocks = need,
        .admitted = false,
        .prefix_hit_tokens = 0,
        .samples = seq.num_computed_tokens + n == seq.num_tokens(),
        .prompt_logits_begin = logits.begin,
        .num_prompt_logits = logits.rows,
    });
  }
  std::erase_if(plan.scheduled, [](const ScheduledSeq& s) { return s.num_new_tokens == 0; });

  // Waiting pass: vLLM admits nothing in a step that preempted.
  if (plan.preempted.empty()) {
    std::vector<int32_t> order(state.waiting.size());
    std::iota(order.begin(), order.end(), 0);
    if (budget.policy == SchedulingPolicy::kPriority) {
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return LowerPriority(state.waiting[a], state.waiting[b]);
      });
    }
    for (int32_t w : order) {
      if (num_alive >= budget.max_num_seqs || token_budget <= 0)
        break;
      const SeqView& seq = state.waiting[w];
      PrefixProbe hit = seq.skip_prefix_cache ? PrefixProbe{} : state.kv->ProbePrefix(seq);
      int32_t n = ChunkSize(seq.num_tokens() - hit.num_tokens, token_budget, budget);
      const PromptLogits logits = CutForPromptLogits(seq, hit.num_tokens, prompt_rows, &n);
      if (n <= 0)
        break;
      const int32_t need = std::max(0, CeilDiv(hit.num_tokens + n, capacity.block_size()) -
                                           static_cast<int32_t>(hit.blocks.size()));
      const int32_t evicted_hits = capacity.NumEvictableHits(hit.blocks);
      if (need + evicted_hits > capacity.free())
        break;
      capacity.Take(need + evicted_hits);
      capacity.Touch(hit.blocks);
      token_budget -= n;
      prompt_rows -= logits.rows;
      ++num_alive;
      plan.scheduled.push_back(ScheduledSeq{
          .id = seq.id,
          .num_computed_tokens = hit.num_tokens,
          .num_new_tokens = n,
          .num_new_blocks = need,
          .admitted = true,
          .prefix_hit_tokens = hit.num_tokens,
          .samples = hit.num_tokens + n == seq.num_tokens(),
          .prompt_logits_begin = logits.begin,
          .num_prompt_logits = logits.rows,
      });
    }
  }
  plan.num_scheduled_tokens = budget.max_num_batched_tokens - token_budget;
  plan.num_free_blocks_after = capacity.free();
  return plan;
}

std::span<const BlockId> KvCacheOracle::block_table(SeqId seq) const {
  if (!manager_.HasSequence(seq))
    return {};
  return manager_.block_table(seq);
}

PrefixProbe KvCacheOracle::ProbePrefix(const SeqView& seq) const {
  static const BlockHashExtras kNoExtras;
  PrefixHit hit = manager_.ProbeComputedBlocks(
      seq.tokens, seq.extras != nullptr ? *seq.extras : kNoExtras, &hasher_);
  return PrefixProbe{.blocks = std::move(hit.blocks), .num_tokens = hit.num_tokens};
}

}  // namespace switchyard::engine
