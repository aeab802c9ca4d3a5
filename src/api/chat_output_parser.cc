#include "api/chat_output_parser.h"

#include <utility>

namespace switchyard::api {
namespace {

// Appends to `delta` what `now` adds to `sent`, and records it as sent. A parse that
// contradicts what was sent (garbage the final parse reads otherwise) adds nothing: sent
// text cannot be taken back.
void SendSuffix(const std::string& now, std::string* sent, std::string* delta) {
  if (now.size() <= sent->size() || now.compare(0, sent->size(), *sent) != 0)
    return;
  delta->append(now, sent->size());
  *sent = now;
}

}  // namespace

ChatOutputParser::ChatOutputParser(std::shared_ptr<const ReasoningParser> reasoning,
                                   std::shared_ptr<const ToolParser> tools)
    : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}

ChatOutput ChatOutputParser::Parse(std::string_view text, ParseStage stage) const {
  ChatOutput out;
  if (reasoning_ != nullptr) {
    ReasoningParse split = reasoning_->Parse(text, stage);
    out.reasoning = std::move(split.reasoning);
    out.content = std::move(split.content);
  } else {
    out.content = std::string(text);
  }
  if (tools_ != nullptr) {
    ToolParse parsed = tools_->Parse(out.content, stage != ParseStage::kPartial);
    out.content = std::move(parsed.content);
    out.calls = std::move(parsed.calls);
  }
  return out;
}

ChatOutput ChatOutputParser::Complete(std::string_view text) const {
  return Parse(text, ParseStage::kComplete);
}

ChatDelta ChatOutputParser::Push(std::string_view delta) {
  text_.append(delta);
  return Diff(Parse(text_, ParseStage::kPartial));
}

ChatDelta ChatOutputParser::Finish() {
  return Diff(Parse(text_, ParseStage::kStreamEnd));
}

ChatDelta ChatOutputParser::Diff(const ChatOutput& now) {
  ChatDelta delta;
  SendSuffix(now.reasoning, &sent_.reasoning, &delta.reasoning);
  SendSuffix(now.content, &sent_.content, &delta.content);
  for (size_t i = 0; i < now.calls.size(); ++i) {
    const ParsedToolCall& call = now.calls[i];
    if (i >= sent_.calls.size()) {
      sent_.calls.push_back(call);
      delta.tool_calls.push_back({static_cast<int>(i), true, call.name, call.arguments});
      continue;
    }
    std::string fragment;
    SendSuffix(call.arguments, &sent_.calls[i].arguments, &fragment);
    if (!fragment.empty())
      delta.tool_calls.push_back({static_cast<int>(i), false, "", std::move(fragment)});
  }
  return delta;
}

}  // namespace switchyard::api
