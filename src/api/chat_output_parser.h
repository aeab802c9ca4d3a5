// ChatOutputParser: one chat choice's output read through the server's parsers, reasoning
// first and tool calls in the content after it (vLLM's order). Complete() answers a whole
// output; a streamed one is fed with Push and ended with Finish, each returning what the
// stream sends now: reasoning and content text, and tool-call deltas in vLLM's shape (a call
// first appears with its index and name, then its arguments come in fragments).
//
// Each step re-parses the output so far (the parsers are pure functions of it) and sends
// the difference from what was sent, so that a stream split anywhere sends the same text
// as the non-streaming answer for a well-formed output. One instance per streamed choice,
// used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/reasoning_parser.h"
#include "api/tool_parser.h"

namespace switchyard::api {

struct ChatOutput {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
};

struct ToolCallDelta {
  int index = 0;
  bool first = false;  // the call's first delta: carries id, type and name
  std::string name;
  std::string arguments;
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatOutputParser {
 public:
  // Either parser may be null (not applied).
  ChatOutputParser(std::shared_ptr<const ReasoningParser> reasoning,
                   std::shared_ptr<const ToolParser> tools);

  ChatOutput Complete(std::string_view text) const;

  ChatDelta Push(std::string_view delta);
  ChatDelta Finish();

 private:
  ChatOutput Parse(std::string_view text, ParseStage stage) const;
  ChatDelta Diff(const ChatOutput& now);

  const std::shared_ptr<const ReasoningParser> reasoning_;
  const std::shared_ptr<const ToolParser> tools_;
  std::string text_;
  ChatOutput sent_;
};

}  // namespace switchyard::api
