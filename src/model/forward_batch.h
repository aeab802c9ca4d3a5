// ForwardBatch: the description of one forward step, the interface the engine's scheduler
// drives. A step mixes sequences in prefill (a chunk of any length) and in decode (one
// token); their new tokens sit back to back in `tokens`, sequence by sequence.
//
// Everything is host memory borrowed for the duration of the call; the model copies what
// the device needs into buffers it preallocated, so building a batch allocates nothing on
// the device. Plain views: the caller owns the arrays.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/backend.h"

namespace switchyard::model {

struct ForwardBatch {
  // New token ids, [n_tokens].
  std::span<const int32_t> tokens;
  // Position of each token in its sequence, [n_tokens].
  std::span<const int32_t> positions;
  // KV-cache slot each token's K/V goes to (block_id * block_size + offset), [n_tokens].
  std::span<const int32_t> slot_ids;
  // One entry per sequence: its rows in `tokens`, its context length INCLUDING these
  // tokens, and its block table (see runtime::AttentionSequence).
  std::span<const runtime::AttentionSequence> sequences;
  // Rows of `tokens` whose logits are wanted, in output order: usually the last row of
  // each sequence; every row for prompt logprobs.
  std::span<const int32_t> logit_rows;
};

}  // namespace switchyard::model
