#include "api/tool_parser.h"

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace switchyard::api {

const std::vector<std::string_view>& ToolParserNames() {
  static const std::vector<std::string_view> kNames = {"hermes", "llama3_json", "mistral",
                                                       "qwen3_coder", "qwen3_xml"};
  return kNames;
}

absl::StatusOr<std::shared_ptr<const ToolParser>> MakeToolParser(std::string_view name) {
  if (name == "hermes")
    return NewHermesToolParser();
  if (name == "llama3_json")
    return NewLlama3JsonToolParser();
  if (name == "mistral")
    return NewMistralToolParser();
  if (name == "qwen3_coder" || name == "qwen3_xml")
    return NewQwen3CoderToolParser();
  return absl::InvalidArgumentError(fmt::format("unknown tool call parser '{}' (known: {})", name,
                                                fmt::join(ToolParserNames(), ", ")));
}

}  // namespace switchyard::api
