#include "engine/sequence_output.h"

#include <algorithm>

namespace switchyard::engine {
namespace {

bool IsUtf8Continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

SequenceOutput::SequenceOutput(const text::Tokenizer* tokenizer, const EngineRequest& request,
                               std::optional<int32_t> eos_token_id,
                               std::span<const int32_t> extra_eos_ids)
    : stop_(request.stop),
      eos_token_id_(request.stop.ignore_eos ? std::nullopt : eos_token_id),
      stop_token_ids_(request.stop.stop_token_ids),
      detokenizer_(tokenizer, request.skip_special_tokens, request.prompt_tokens,
                   request.spaces_between_special_tokens) {
  if (!request.stop.ignore_eos) {
    for (int32_t id : extra_eos_ids) {
      if (id != eos_token_id &&
          std::find(stop_token_ids_.begin(), stop_token_ids_.end(), id) == stop_token_ids_.end()) {
        stop_token_ids_.push_back(id);
      }
    }
  }
  if (!stop_.include_stop_str_in_output) {
    for (const std::string& s : stop_.stop_strings)
      lag_bytes_ = std::max(lag_bytes_, s.empty() ? 0 : s.size() - 1);
  }
}

bool SequenceOutput::IsStopToken(int32_t token, StopReason* reason) const {
  if (eos_token_id_.has_value() && token == *eos_token_id_)
    return true;
  if (std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end()) {
    *reason = token;
    return true;
  }
  return false;
}

SequenceStep SequenceOutput::Append(int32_t token, int64_t num_generated, bool context_full,
                                    std::string* text) {
  SequenceStep step;
  const bool past_min = num_generated >= stop_.min_tokens;
  if (past_min && IsStopToken(token, &step.stop_reason)) {
    if (stop_.include_stop_str_in_output)
      output_.append(detokenizer_.Push(token));
    output_.append(detokenizer_.Flush());
    step.finish_reason = FinishReason::kStop;
    Release(true, text);
    return step;
  }
  const size_t before = output_.size();
  output_.append(detokenizer_.Push(token));
  const bool length = context_full || num_generated >= stop_.max_tokens;
  if (length)
    output_.append(detokenizer_.Flush());
  if (past_min && !stop_.stop_strings.empty() &&
      MatchStopString(output_.size() - before, &step.stop_reason)) {
    step.finish_reason = FinishReason::kStop;
  } else if (length) {
    step.finish_reason = FinishReason::kLength;
  }
  Release(step.finish_reason.has_value(), text);
  return step;
}

void SequenceOutput::Finish(std::string* text) {
  output_.append(detokenizer_.Flush());
  Release(true, text);
}

bool SequenceOutput::MatchStopString(size_t new_bytes, StopReason* reason) {
  if (new_bytes == 0)
    return false;
  // vLLM checks the stop strings in request order and takes the first that matches.
  for (const std::string& stop : stop_.stop_strings) {
    if (stop.empty())
      continue;
    // A match must end inside the new bytes, so it starts at or after this.
    const size_t window = new_bytes + stop.size() - 1;
    const size_t from = output_.size() > window ? output_.size() - window : 0;
    const size_t at = output_.find(stop, from);
    if (at == std::string::npos)
      continue;
    const size_t cut = stop_.include_stop_str_in_output ? at + stop.size() : at;
    output_.resize(std::min(output_.size(), cut));
    sent_ = std::min(sent_, output_.size());
    *reason = stop;
    return true;
  }
  return false;
}

void SequenceOutput::Release(bool final, std::string* text) {
  size_t end = output_.size();
  if (!final) {
    end = end > lag_bytes_ ? end - lag_bytes_ : 0;
    while (end > sent_ && end < output_.size() && IsUtf8Continuation(output_[end]))
      --end;
  }
  if (end > sent_) {
    text->append(output_, sent_, end - sent_);
    sent_ = end;
  }
}

}  // namespace switchyard::engine
