// SequenceTable: the engine loop's sequences and its two queues, running (admission order)
// and waiting (queue order, preempted sequences at the front). It is the mutable state the
// pure Schedule reads through View() and ApplyPlan (step_apply.h) updates.
//
// Owned and used by the engine loop thread only; no locks.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

#include "engine/block_hash.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"

namespace switchyard::engine {

struct Sequence {
  SeqId id = 0;
  int32_t priority = 0;
  // Prompt followed by generated tokens; append-only except through the table.
  std::vector<int32_t> tokens;
  int32_t num_prompt_tokens = 0;
  BlockHashExtras extras;
  std::optional<int64_t> lora_id;
  // Prompt logprobs: positions [prompt_logits_begin, prompt_logits_end) still need their
  // logits; the table moves begin past every position a committed step computed.
  int32_t prompt_logits_begin = 0;
  int32_t prompt_logits_end = 0;
  // Never starts from the prefix cache (its writes still publish blocks).
  bool skip_prefix_cache = false;

  // Set by the table.
  int64_t arrival = 0;
  int32_t num_computed_tokens = 0;
  int32_t num_preemptions = 0;
  bool running = false;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

class SequenceTable {
 public:
  // Queues a new sequence at the back of waiting and stamps its arrival. InvalidArgument
  // for an empty prompt, a prompt length that disagrees with `tokens`, or prompt logits that
  // reach the last prompt token or come without skip_prefix_cache; AlreadyExists for a
  // taken id.
  absl::Status Add(Sequence seq);

  // nullptr when unknown.
  const Sequence* Find(SeqId id) const;
  const std::vector<SeqId>& running() const { return running_; }
  const std::deque<SeqId>& waiting() const { return waiting_; }
  size_t size() const { return seqs_.size(); }

  // The state Schedule reads. Valid until the next non-const call on the table.
  SchedulerState View(const KvCapacityOracle& kv);

  // Appends a sampled token to a running sequence whose tokens are all computed.
  absl::Status AppendToken(SeqId id, int32_t token);
  // Removes a finished or aborted sequence from its queue and frees its blocks, if any;
  // with a null `kv` the caller keeps them (a producer's lease for a remote decode).
  absl::Status Finish(SeqId id, KvCacheManager* kv);

  // Queue moves for ApplyPlan.
  // Running -> front of waiting, no computed tokens.
  absl::Status MoveToWaitingFront(SeqId id);
  // Waiting -> back of running.
  absl::Status MoveToRunning(SeqId id);
  // REQUIRES: the sequence exists.
  void SetComputedTokens(SeqId id, int32_t n);

 private:
  SeqView ViewOf(const Sequence& seq) const;

  absl::flat_hash_map<SeqId, Sequence> seqs_;
  std::vector<SeqId> running_;
  std::deque<SeqId> waiting_;
  int64_t next_arrival_ = 0;
  // View() storage, reused across steps.
  std::vector<SeqView> running_views_;
  std::vector<SeqView> waiting_views_;
};

}  // namespace switchyard::engine
