// Mistral calls (vLLM's `mistral` parser): content, then [TOOL_CALLS] and either a JSON array
// of {"name": ..., "arguments": {...}} (tokenizers before v11) or name{arguments} per call,
// each after its own [TOOL_CALLS] (v11 and later). Ids are Mistral's 9 alphanumerics. A call
// that is not valid JSON makes the whole text content, as in vLLM.
#include <string_view>

#include "api/internal/partial_json.h"
#include "api/tool_parser.h"

namespace switchyard::api {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";

class MistralToolParser : public ToolParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override {
    ToolParse out;
    size_t at = text.find(kToolCalls);
    if (at == std::string_view::npos) {
      out.content =
          std::string(final ? text : text.substr(0, internal::HeldBackEnd(text, kToolCalls)));
      return out;
    }
    out.content = std::string(text.substr(0, at));
    size_t i = internal::SkipSpace(text, at + kToolCalls.size());
    if (i >= text.size())
      return final ? Failed(text) : out;
    if (text[i] == '[') {
      if (!internal::ScanCallArray(text, i, {"arguments"}, final, &out.calls))
        return final ? Failed(text) : out;
      return out;
    }
    while (true) {
      const size_t brace = text.find('{', i);
      if (brace == std::string_view::npos)
        return final ? Failed(text) : out;
      std::string_view name = text.substr(i, brace - i);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\n'))
        name.remove_suffix(1);
      if (name.empty() || name.find_first_of("\"{}[],:") != std::string_view::npos)
        return final ? Failed(text) : out;
      const internal::ValueScan args = internal::ScanValue(text, brace);
      if (args.malformed)
        return final ? Failed(text) : out;
      out.calls.push_back({std::string(name), std::string(text.substr(brace, args.end - brace))});
      if (!args.complete)
        return final ? Failed(text) : out;
      if (final && !IsJsonObject(text.substr(brace, args.end - brace)))
        return Failed(text);
      at = text.find(kToolCalls, args.end);
      if (at == std::string_view::npos)
        return out;
      i = internal::SkipSpace(text, at + kToolCalls.size());
    }
  }

  ToolCallIdKind id_kind() const override { return ToolCallIdKind::kMistral; }

 private:
  static ToolParse Failed(std::string_view text) { return ToolParse{std::string(text), {}}; }

  // A v11 call's arguments: the name is outside, so the object is checked with a stand-in.
  static bool IsJsonObject(std::string_view arguments) {
    std::string wrapped = "{\"name\":\"x\",\"arguments\":";
    wrapped.append(arguments);
    wrapped.push_back('}');
    return internal::IsCompleteCall(wrapped, {"arguments"});
  }
};

}  // namespace

std::shared_ptr<const ToolParser> NewMistralToolParser() {
  return std::make_shared<MistralToolParser>();
}

}  // namespace switchyard::api
