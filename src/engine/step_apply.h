// ApplyPlan: the engine loop's side of a scheduler step. It commits a StepPlan made by
// Schedule (scheduler.h) to the KV cache manager and the sequence table, in plan order:
// preemptions (blocks freed, sequence to the front of waiting, computed tokens reset),
// then running sequences, then admissions (each registered with the KV cache manager if
// new, and started from a fresh GetComputedBlocks).
//
// An admitted sequence's hit may differ from the one Schedule probed: blocks published by
// sequences committed earlier in the same step can lengthen it, and hit blocks evicted by
// their allocations can shorten it. ApplyPlan keeps the planned number of new tokens, cut
// down when a longer hit leaves fewer to compute, so the step never uses more tokens than
// planned. A changed hit may take free-queue blocks the probed one did not (under a sliding
// window its window can move onto other free cached blocks); an admission that then no
// longer fits stays waiting for a later step. The returned entries say what was committed.
//
// Engine loop thread only.
#pragma once

#include <vector>

#include "absl/status/statusor.h"

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence_table.h"

namespace switchyard::engine {

// Returns the committed work, one entry per plan.scheduled entry, in the same order;
// each sequence's num_computed_tokens already counts its new tokens (their KV slots are
// allocated; the forward step fills them). An admission that stayed waiting has an entry
// with only its id (no tokens, not admitted).
// REQUIRES: `plan` was made by Schedule from table->View() over `kv`, with no change in
// between. An error means the plan did not match the state (a bug); the state is then
// partly committed.
absl::StatusOr<std::vector<ScheduledSeq>> ApplyPlan(const StepPlan& plan, SequenceTable* table,
                                                    KvCacheManager* kv);

}  // namespace switchyard::engine
