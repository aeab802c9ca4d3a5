// Arbitrary bytes as a model's output, read through every tool-call parser (alone and after
// each reasoning parser) whole and streamed in pieces whose size the first byte picks. Model
// output is untrusted: the parsers must never crash, hang or send a delta for a call they
// never started.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

#include "api/chat_output_parser.h"
#include "api/reasoning_parser.h"
#include "api/tool_parser.h"

namespace {

using switchyard::api::ChatDelta;
using switchyard::api::ChatOutputParser;
using switchyard::api::MakeReasoningParser;
using switchyard::api::MakeToolParser;
using switchyard::api::NewNamedToolParser;
using switchyard::api::NewRequiredToolParser;
using switchyard::api::ReasoningParser;
using switchyard::api::ReasoningParserNames;
using switchyard::api::ToolCallDelta;
using switchyard::api::ToolParser;
using switchyard::api::ToolParserNames;

void Check(const std::shared_ptr<const ReasoningParser>& reasoning,
           const std::shared_ptr<const ToolParser>& tools, std::string_view text, size_t piece) {
  ChatOutputParser(reasoning, tools).Complete(text);
  ChatOutputParser stream(reasoning, tools);
  size_t calls = 0;
  auto take = [&calls](const ChatDelta& delta) {
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (call.first && static_cast<size_t>(call.index) == calls)
        ++calls;
      if (static_cast<size_t>(call.index) >= calls)
        std::abort();  // a fragment of a call that was never started
    }
  };
  for (size_t i = 0; i < text.size(); i += piece)
    take(stream.Push(text.substr(i, piece)));
  take(stream.Finish());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const size_t piece = data[0] % 7 + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::shared_ptr<const ToolParser>> tools = {NewNamedToolParser("f"),
                                                          NewRequiredToolParser(), nullptr};
  for (std::string_view name : ToolParserNames())
    tools.push_back(*MakeToolParser(name));
  std::vector<std::shared_ptr<const ReasoningParser>> reasonings = {nullptr};
  for (std::string_view name : ReasoningParserNames())
    reasonings.push_back(*MakeReasoningParser(name));
  for (const auto& reasoning : reasonings) {
    for (const auto& tool : tools)
      Check(reasoning, tool, text, piece);
  }
  return 0;
}
