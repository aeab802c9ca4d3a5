// Llama 3.1-3.3 JSON calls (vLLM's `llama3_json` parser): an output that starts with
// <|python_tag|> or '{' is a list of {"name": ..., "parameters" (or "arguments"): {...}}
// objects separated by ';'; anything else is content. A call that is not valid JSON makes the
// whole output content, as in vLLM.
#include <string_view>

#include "api/internal/partial_json.h"
#include "api/tool_parser.h"

namespace switchyard::api {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonToolParser : public ToolParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override {
    ToolParse out;
    // Until the first bytes tell content from a call, a stream sends nothing.
    if (!final && kPythonTag.substr(0, text.size()) == text)
      return out;
    size_t i = 0;
    if (text.substr(0, kPythonTag.size()) == kPythonTag) {
      i = kPythonTag.size();
    } else if (text.empty() || text.front() != '{') {
      out.content = std::string(text);
      return out;
    }
    while (true) {
      i = internal::SkipSpace(text, i);
      if (i >= text.size())
        break;
      if (text[i] != '{')
        return final ? Failed(text) : out;
      const internal::CallScan scan =
          internal::ScanCallObject(text, i, {"parameters", "arguments"});
      if (scan.malformed)
        return final ? Failed(text) : out;
      if (scan.name_done)
        out.calls.push_back(internal::ToParsedToolCall(text, scan));
      if (!scan.object_done)
        return final ? Failed(text) : out;
      if (final &&
          !internal::IsCompleteCall(text.substr(i, scan.end - i), {"parameters", "arguments"}))
        return Failed(text);
      i = internal::SkipSpace(text, scan.end);
      if (i < text.size() && text[i] == ';')
        ++i;
    }
    if (final && out.calls.empty())
      return Failed(text);
    return out;
  }

 private:
  static ToolParse Failed(std::string_view text) { return ToolParse{std::string(text), {}}; }
};

}  // namespace

std::shared_ptr<const ToolParser> NewLlama3JsonToolParser() {
  return std::make_shared<Llama3JsonToolParser>();
}

}  // namespace switchyard::api
