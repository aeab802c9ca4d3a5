// Reasoning parsers: split a thinking model's output into reasoning and content, as vLLM's
// --reasoning-parser NAME does for <think>...</think> models. Both take an optional leading
// <think> (templates that open the block in the prompt leave it out) and split at </think>;
// an output without </think> is all reasoning for deepseek_r1 (the model is still thinking)
// and all content for qwen3 (it did not think), as in vLLM's non-streaming parsers. A stream
// cannot wait for the end to know: both stream text as reasoning until </think>, as vLLM's
// streaming parsers do.
//
// Like the tool parsers (tool_parser.h), a parser is a pure function of the output so far, so
// that a stream sends the difference between two parses. Immutable; any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::api {

struct ReasoningParse {
  std::string reasoning;
  std::string content;
};

enum class ParseStage {
  kPartial,    // more text may follow: only what it cannot change
  kStreamEnd,  // the end of a streamed output
  kComplete,   // a whole output, not streamed
};

class ReasoningParser {
 public:
  // `content_without_end`: an output without the end tag is content (qwen3), not reasoning.
  explicit ReasoningParser(bool content_without_end) : content_without_end_(content_without_end) {}

  ReasoningParse Parse(std::string_view text, ParseStage stage) const;

 private:
  const bool content_without_end_;
};

// The --reasoning-parser names served.
const std::vector<std::string_view>& ReasoningParserNames();

// InvalidArgument naming the known parsers for an unknown name.
absl::StatusOr<std::shared_ptr<const ReasoningParser>> MakeReasoningParser(std::string_view name);

}  // namespace switchyard::api
