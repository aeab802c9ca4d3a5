#include "api/reasoning_parser.h"

#include "fmt/format.h"
#include "fmt/ranges.h"

#include "api/internal/partial_json.h"

namespace switchyard::api {
namespace {

constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

}  // namespace

ReasoningParse ReasoningParser::Parse(std::string_view text, ParseStage stage) const {
  ReasoningParse out;
  if (text.substr(0, kThinkStart.size()) == kThinkStart) {
    text.remove_prefix(kThinkStart.size());
  } else if (stage == ParseStage::kPartial && kThinkStart.substr(0, text.size()) == text) {
    return out;  // may be the start tag's first bytes
  }
  const size_t end = text.find(kThinkEnd);
  if (end != std::string_view::npos) {
    out.reasoning = std::string(text.substr(0, end));
    out.content = std::string(text.substr(end + kThinkEnd.size()));
  } else if (stage == ParseStage::kComplete && content_without_end_) {
    out.content = std::string(text);
  } else if (stage == ParseStage::kPartial) {
    out.reasoning = std::string(text.substr(0, internal::HeldBackEnd(text, kThinkEnd)));
  } else {
    out.reasoning = std::string(text);
  }
  return out;
}

const std::vector<std::string_view>& ReasoningParserNames() {
  static const std::vector<std::string_view> kNames = {"deepseek_r1", "qwen3"};
  return kNames;
}

absl::StatusOr<std::shared_ptr<const ReasoningParser>> MakeReasoningParser(std::string_view name) {
  if (name == "deepseek_r1")
    return std::make_shared<const ReasoningParser>(false);
  if (name == "qwen3")
    return std::make_shared<const ReasoningParser>(true);
  return absl::InvalidArgumentError(fmt::format("unknown reasoning parser '{}' (known: {})", name,
                                                fmt::join(ReasoningParserNames(), ", ")));
}

}  // namespace switchyard::api
