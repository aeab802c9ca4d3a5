#include "engine/step_apply.h"

#include <algorithm>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::engine {
namespace {

absl::Status PlanMismatch(SeqId id, const absl::Status& cause) {
  return absl::InternalError(
      fmt::format("scheduler: plan for sequence {} no longer fits: {}", id, cause.ToString()));
}

}  // namespace

absl::StatusOr<std::vector<ScheduledSeq>> ApplyPlan(const StepPlan& plan, SequenceTable* table,
                                                    KvCacheManager* kv) {
  for (SeqId id : plan.preempted) {
    SY_RETURN_IF_ERROR(kv->Preempt(id));
    SY_RETURN_IF_ERROR(table->MoveToWaitingFront(id));
  }
  std::vector<ScheduledSeq> committed;
  committed.reserve(plan.scheduled.size());
  for (const ScheduledSeq& planned : plan.scheduled) {
    const Sequence* seq = table->Find(planned.id);
    if (seq == nullptr) {
      return absl::InternalError(
          fmt::format("scheduler: planned sequence {} is not in the table", planned.id));
    }
    ScheduledSeq done = planned;
    PrefixHit hit;
    if (planned.admitted) {
      if (!kv->HasSequence(planned.id))
        SY_RETURN_IF_ERROR(kv->AddSequence(planned.id, seq->extras, seq->lora_id));
      if (!seq->skip_prefix_cache) {
        SY_ASSIGN_OR_RETURN(hit, kv->GetComputedBlocks(planned.id, seq->tokens));
      }
      done.prefix_hit_tokens = hit.num_tokens;
      done.num_computed_tokens = hit.num_tokens;
      done.num_new_tokens = std::min(planned.num_new_tokens, seq->num_tokens() - hit.num_tokens);
    }
    absl::StatusOr<AllocationPlan> allocation =
        kv->Plan(planned.id, seq->tokens, done.num_new_tokens, hit);
    if (!allocation.ok() && planned.admitted && absl::IsResourceExhausted(allocation.status())) {
      ScheduledSeq waits;
      waits.id = planned.id;
      committed.push_back(waits);
      continue;
    }
    if (!allocation.ok())
      return PlanMismatch(planned.id, allocation.status());
    kv->Commit(*allocation, seq->tokens);
    done.num_new_blocks = allocation->num_new_blocks;
    done.samples = done.context_len() == seq->num_tokens();
    if (planned.admitted)
      SY_RETURN_IF_ERROR(table->MoveToRunning(planned.id));
    table->SetComputedTokens(planned.id, done.context_len());
    committed.push_back(done);
  }
  return committed;
}

}  // namespace switchyard::engine
