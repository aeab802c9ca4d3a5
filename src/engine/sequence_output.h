// SequenceOutput: one generated sequence's text and stop decisions, vLLM's order
// (vllm/v1/core/sched/utils.py check_stop, vllm/v1/engine/detokenizer.py):
//   1. length: the context is full or max_tokens tokens were generated;
//   2. nothing else before min_tokens;
//   3. the tokenizer's EOS (unless ignore_eos), then stop_token_ids (the model's other EOS
//      ids join them unless ignore_eos); a stop token's text is not emitted unless
//      include_stop_str_in_output;
//   4. stop strings, searched in the tail that the new text can complete; the text is cut
//      before the match (or after it with include_stop_str_in_output).
// Text is released as it becomes final: a byte lag of the longest stop string less one
// (moved back to a UTF-8 boundary) is held until more text or the end shows it is not part
// of a stop string.
//
// Not thread-safe: one per sequence, used by the engine loop thread. Borrows the tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_request.h"
#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"

namespace switchyard::engine {

struct SequenceStep {
  std::optional<FinishReason> finish_reason;
  StopReason stop_reason;
};

class SequenceOutput {
 public:
  // `eos_token_id`: the tokenizer's EOS; `extra_eos_ids`: the model's other EOS ids.
  SequenceOutput(const text::Tokenizer* tokenizer, const EngineRequest& request,
                 std::optional<int32_t> eos_token_id, std::span<const int32_t> extra_eos_ids);

  // Takes one generated token. `num_generated` counts it; `context_full` says the sequence
  // reached max_model_len. Appends the newly final text to `*text`.
  SequenceStep Append(int32_t token, int64_t num_generated, bool context_full, std::string* text);

  // Releases the held-back text after a finish that Append did not decide (abort).
  void Finish(std::string* text);

 private:
  bool IsStopToken(int32_t token, StopReason* reason) const;
  // Searches the stop strings in the tail of output_ that `new_bytes` may complete; on a
  // match cuts output_ and returns true.
  bool MatchStopString(size_t new_bytes, StopReason* reason);
  // Appends output_[sent_, end) to `text`, where end leaves the lag unless `final`.
  void Release(bool final, std::string* text);

  const StopConditions& stop_;
  std::optional<int32_t> eos_token_id_;
  std::vector<int32_t> stop_token_ids_;
  text::IncrementalDetokenizer detokenizer_;
  size_t lag_bytes_ = 0;
  std::string output_;
  size_t sent_ = 0;
};

}  // namespace switchyard::engine
