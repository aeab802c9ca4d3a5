// The tool choices that force a call (vLLM's named tool_choice and "required"), whose output
// the structured-output grammar already shaped: a named tool's output is its arguments; a
// "required" output is a JSON array of {"name": ..., "parameters": {...}}. Content is empty.
#include <string>
#include <string_view>
#include <utility>

#include "api/internal/partial_json.h"
#include "api/tool_parser.h"

namespace switchyard::api {
namespace {

class NamedToolParser : public ToolParser {
 public:
  explicit NamedToolParser(std::string name) : name_(std::move(name)) {}

  ToolParse Parse(std::string_view text, bool /*final*/) const override {
    ToolParse out;
    out.calls.push_back({name_, std::string(text)});
    return out;
  }

 private:
  const std::string name_;
};

class RequiredToolParser : public ToolParser {
 public:
  // The grammar admits nothing else, but max_tokens may cut the array short: the calls that
  // were complete are kept.
  ToolParse Parse(std::string_view text, bool final) const override {
    ToolParse out;
    size_t i = internal::SkipSpace(text, 0);
    if (i >= text.size() || text[i] != '[')
      return out;
    ++i;
    while (true) {
      i = internal::SkipSpace(text, i);
      if (i >= text.size() || text[i] == ']')
        return out;
      const internal::CallScan scan = internal::ScanCallObject(text, i, {"parameters"});
      if (scan.malformed || (!scan.object_done && final))
        return out;
      if (scan.name_done)
        out.calls.push_back(internal::ToParsedToolCall(text, scan));
      if (!scan.object_done)
        return out;
      i = internal::SkipSpace(text, scan.end);
      if (i >= text.size() || text[i] != ',')
        return out;
      ++i;
    }
  }
};

}  // namespace

std::shared_ptr<const ToolParser> NewNamedToolParser(std::string name) {
  return std::make_shared<NamedToolParser>(std::move(name));
}

std::shared_ptr<const ToolParser> NewRequiredToolParser() {
  return std::make_shared<RequiredToolParser>();
}

}  // namespace switchyard::api
