// Hermes-style calls (vLLM's `hermes` parser, the one vLLM's docs give for Qwen2.5 and Qwen3):
// content, then one or more <tool_call>{"name": ..., "arguments": {...}}</tool_call>. The
// content is the text before the first call; a call that is not valid JSON with a name and
// arguments makes the whole text content, as vLLM's json.loads failure does.
#include <string_view>

#include "api/internal/partial_json.h"
#include "api/tool_parser.h"

namespace switchyard::api {
namespace {

constexpr std::string_view kStart = "<tool_call>";

class HermesToolParser : public ToolParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override {
    ToolParse out;
    size_t at = text.find(kStart);
    if (at == std::string_view::npos) {
      out.content = std::string(final ? text : text.substr(0, internal::HeldBackEnd(text, kStart)));
      return out;
    }
    out.content = std::string(text.substr(0, at));
    while (at != std::string_view::npos) {
      const size_t i = internal::SkipSpace(text, at + kStart.size());
      if (i >= text.size()) {
        if (final)
          return Failed(text);
        break;
      }
      const internal::CallScan scan = internal::ScanCallObject(text, i, {"arguments"});
      if (scan.malformed)
        return final ? Failed(text) : out;
      if (scan.name_done)
        out.calls.push_back(internal::ToParsedToolCall(text, scan));
      if (!scan.object_done) {
        if (final)
          return Failed(text);
        break;
      }
      if (final && !internal::IsCompleteCall(text.substr(i, scan.end - i), {"arguments"}))
        return Failed(text);
      at = text.find(kStart, scan.end);
    }
    return out;
  }

 private:
  static ToolParse Failed(std::string_view text) { return ToolParse{std::string(text), {}}; }
};

}  // namespace

std::shared_ptr<const ToolParser> NewHermesToolParser() {
  return std::make_shared<HermesToolParser>();
}

}  // namespace switchyard::api
