#include "engine/sequence_table.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"

namespace switchyard::engine {
namespace {

absl::Status UnknownSequence(SeqId id) {
  return absl::NotFoundError(fmt::format("scheduler: unknown sequence {}", id));
}

}  // namespace

absl::Status SequenceTable::Add(Sequence seq) {
  if (seq.tokens.empty() || seq.num_prompt_tokens != seq.num_tokens()) {
    return absl::InvalidArgumentError(
        fmt::format("scheduler: sequence {} needs a non-empty prompt of num_prompt_tokens ({}) "
                    "tokens, got {}",
                    seq.id, seq.num_prompt_tokens, seq.tokens.size()));
  }
  // A prefix hit would skip positions whose logits are wanted.
  if (seq.prompt_logits_end > seq.prompt_logits_begin &&
      (!seq.skip_prefix_cache || seq.prompt_logits_end >= seq.num_prompt_tokens)) {
    return absl::InvalidArgumentError(
        fmt::format("scheduler: sequence {} wants prompt logits [{}, {}) of {} prompt tokens "
                    "(they must end before the last one and skip the prefix cache)",
                    seq.id, seq.prompt_logits_begin, seq.prompt_logits_end, seq.num_prompt_tokens));
  }
  const SeqId id = seq.id;
  if (seqs_.contains(id)) {
    return absl::AlreadyExistsError(fmt::format("scheduler: sequence {} already exists", id));
  }
  seq.arrival = next_arrival_++;
  seq.num_computed_tokens = 0;
  seq.num_preemptions = 0;
  seq.running = false;
  seqs_.emplace(id, std::move(seq));
  waiting_.push_back(id);
  return absl::OkStatus();
}

const Sequence* SequenceTable::Find(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

SeqView SequenceTable::ViewOf(const Sequence& seq) const {
  return SeqView{
      .id = seq.id,
      .arrival = seq.arrival,
      .priority = seq.priority,
      .num_prompt_tokens = seq.num_prompt_tokens,
      .num_output_tokens = seq.num_output_tokens(),
      .num_computed_tokens = seq.num_computed_tokens,
      .tokens = seq.tokens,
      .extras = &seq.extras,
      .prompt_logits_begin = seq.prompt_logits_begin,
      .prompt_logits_end = seq.prompt_logits_end,
      .skip_prefix_cache = seq.skip_prefix_cache,
  };
}

void SequenceTable::SetComputedTokens(SeqId id, int32_t n) {
  Sequence& seq = seqs_.at(id);
  seq.num_computed_tokens = n;
  // The step that computed these positions returned their logits (Schedule cuts chunks so).
  seq.prompt_logits_begin = std::max(seq.prompt_logits_begin, std::min(n, seq.prompt_logits_end));
}

SchedulerState SequenceTable::View(const KvCapacityOracle& kv) {
  running_views_.clear();
  waiting_views_.clear();
  for (SeqId id : running_)
    running_views_.push_back(ViewOf(seqs_.at(id)));
  for (SeqId id : waiting_)
    waiting_views_.push_back(ViewOf(seqs_.at(id)));
  return SchedulerState{.running = running_views_, .waiting = waiting_views_, .kv = &kv};
}

absl::Status SequenceTable::AppendToken(SeqId id, int32_t token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return UnknownSequence(id);
  Sequence& seq = it->second;
  if (!seq.running || seq.num_computed_tokens != seq.num_tokens()) {
    return absl::FailedPreconditionError(fmt::format(
        "scheduler: sequence {} cannot take a token ({} of {} tokens computed, {})", id,
        seq.num_computed_tokens, seq.num_tokens(), seq.running ? "running" : "waiting"));
  }
  seq.tokens.push_back(token);
  return absl::OkStatus();
}

absl::Status SequenceTable::Finish(SeqId id, KvCacheManager* kv) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return UnknownSequence(id);
  if (it->second.running) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  seqs_.erase(it);
  if (kv != nullptr && kv->HasSequence(id))
    return kv->Free(id);
  return absl::OkStatus();
}

absl::Status SequenceTable::MoveToWaitingFront(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return UnknownSequence(id);
  Sequence& seq = it->second;
  if (!seq.running) {
    return absl::FailedPreconditionError(
        fmt::format("scheduler: cannot preempt waiting sequence {}", id));
  }
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  seq.running = false;
  seq.num_computed_tokens = 0;
  ++seq.num_preemptions;
  return absl::OkStatus();
}

absl::Status SequenceTable::MoveToRunning(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return UnknownSequence(id);
  if (it->second.running) {
    return absl::FailedPreconditionError(
        fmt::format("scheduler: cannot admit running sequence {}", id));
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  running_.push_back(id);
  it->second.running = true;
  return absl::OkStatus();
}

}  // namespace switchyard::engine
