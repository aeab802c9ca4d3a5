// Qwen3-Coder's XML calls (vLLM's `qwen3_coder` and `qwen3_xml` parsers): content, then
//   <tool_call>
//   <function=NAME>
//   <parameter=KEY>
//   VALUE
//   </parameter>
//   </function>
//   </tool_call>
// per call. The arguments are JSON built from the parameters, each VALUE typed by the tool's
// schema as vLLM does (strings stay strings; integer, number, boolean and object/array values
// are read as JSON; "null" is null; a parameter the schema does not list is read as JSON when it
// is JSON, else kept as a string). A call's arguments grow one whole parameter at a time and
// close at </function>.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "simdjson.h"

#include "api/internal/partial_json.h"
#include "api/tool_parser.h"
#include "base/json.h"

namespace switchyard::api {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

// The JSON types a tool's schema gives its parameters: (tool, parameter) -> type.
struct ParameterType {
  std::string tool;
  std::string parameter;
  std::string type;
};

bool IsJson(std::string_view value) {
  simdjson::dom::parser parser;
  return parser.parse(std::string(value)).error() == simdjson::SUCCESS;
}

class Qwen3CoderToolParser : public ToolParser {
 public:
  explicit Qwen3CoderToolParser(std::vector<ParameterType> types) : types_(std::move(types)) {}

  ToolParse Parse(std::string_view text, bool final) const override {
    ToolParse out;
    size_t at = text.find(kStart);
    if (at == std::string_view::npos) {
      out.content = std::string(final ? text : text.substr(0, internal::HeldBackEnd(text, kStart)));
      return out;
    }
    out.content = std::string(text.substr(0, at));
    while (at != std::string_view::npos) {
      const size_t name_at = text.find(kFunction, at);
      if (name_at == std::string_view::npos)
        break;
      const size_t name_end = text.find('>', name_at);
      if (name_end == std::string_view::npos)
        break;
      ParsedToolCall call;
      call.name = std::string(
          text.substr(name_at + kFunction.size(), name_end - name_at - kFunction.size()));
      const size_t end = text.find(kFunctionEnd, name_end);
      const std::string_view body =
          text.substr(name_end + 1,
                      end == std::string_view::npos ? std::string_view::npos : end - name_end - 1);
      call.arguments = Arguments(call.name, body, end != std::string_view::npos || final);
      out.calls.push_back(std::move(call));
      if (end == std::string_view::npos)
        break;
      at = text.find(kStart, end);
    }
    return out;
  }

  std::shared_ptr<const ToolParser> ForRequest(
      const std::vector<ToolFunction>& tools) const override {
    std::vector<ParameterType> types;
    simdjson::dom::parser parser;
    for (const ToolFunction& tool : tools) {
      simdjson::dom::object properties;
      if (tool.parameters.empty() ||
          parser.parse(tool.parameters)["properties"].get(properties) != simdjson::SUCCESS) {
        continue;
      }
      for (auto field : properties) {
        std::string_view type;
        if (field.value["type"].get(type) == simdjson::SUCCESS)
          types.push_back({tool.name, std::string(field.key), std::string(type)});
      }
    }
    return std::make_shared<Qwen3CoderToolParser>(std::move(types));
  }

 private:
  // The JSON object of the complete parameters in `body`; closed when `closed`.
  std::string Arguments(std::string_view tool, std::string_view body, bool closed) const {
    std::string json = "{";
    size_t at = body.find(kParameter);
    while (at != std::string_view::npos) {
      const size_t key_end = body.find('>', at);
      if (key_end == std::string_view::npos)
        break;
      size_t value_end = body.find(kParameterEnd, key_end);
      if (value_end == std::string_view::npos)
        break;  // a value is sent whole: its end decides its type
      const std::string_view key =
          body.substr(at + kParameter.size(), key_end - at - kParameter.size());
      std::string_view value = body.substr(key_end + 1, value_end - key_end - 1);
      if (!value.empty() && value.front() == '\n')
        value.remove_prefix(1);
      if (!value.empty() && value.back() == '\n')
        value.remove_suffix(1);
      if (json.size() > 1)
        json.append(", ");
      base::AppendJsonString(key, false, &json);
      json.append(": ");
      AppendValue(tool, key, value, &json);
      at = body.find(kParameter, value_end);
    }
    if (closed)
      json.push_back('}');
    return json;
  }

  void AppendValue(std::string_view tool, std::string_view key, std::string_view value,
                   std::string* out) const {
    std::string_view type;
    for (const ParameterType& t : types_) {
      if (t.tool == tool && t.parameter == key)
        type = t.type;
    }
    const bool as_string = type == "string" || type == "str" || type == "text";
    if (value == "null" && !as_string) {
      out->append("null");
    } else if ((type == "boolean" && (value == "true" || value == "false")) ||
               (!as_string && IsJson(value))) {
      out->append(value);
    } else {
      base::AppendJsonString(value, false, out);
    }
  }

  const std::vector<ParameterType> types_;
};

}  // namespace

std::shared_ptr<const ToolParser> NewQwen3CoderToolParser() {
  return std::make_shared<Qwen3CoderToolParser>(std::vector<ParameterType>());
}

}  // namespace switchyard::api
