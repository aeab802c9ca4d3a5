#include "router/internal/generated_tokens.h"

#include <optional>

#include "simdjson.h"

namespace switchyard::router::internal {
namespace {

constexpr std::string_view kData = "data:";
constexpr std::string_view kUsage = "\"usage\"";
// vLLM's first chat chunk announces the role with no content: not a token.
constexpr std::string_view kRoleOnly = R"("delta":{"role":"assistant","content":""})";

// usage.completion_tokens of a JSON object, when it has one.
std::optional<int64_t> CompletionTokens(std::string_view json) {
  if (json.find(kUsage) == std::string_view::npos)
    return std::nullopt;  // most chunks: no parse
  thread_local simdjson::ondemand::parser parser;
  simdjson::padded_string padded(json);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS)
    return std::nullopt;
  int64_t tokens = 0;
  if (doc.find_field_unordered("usage").find_field_unordered("completion_tokens").get(tokens) !=
          simdjson::SUCCESS ||
      tokens < 0) {
    return std::nullopt;
  }
  return tokens;
}

}  // namespace

int64_t GeneratedTokens::SetExact(int64_t exact) {
  const int64_t change = exact - count_;
  count_ = exact;
  return change;
}

int64_t GeneratedTokens::FeedEvents(std::string_view events) {
  const int64_t before = count_;
  size_t pos = 0;
  while ((pos = events.find(kData, pos)) != std::string_view::npos) {
    // Only a line's start is a field; "data:" inside a payload is not.
    const bool line_start = pos == 0 || events[pos - 1] == '\n' || events[pos - 1] == '\r';
    pos += kData.size();
    if (!line_start)
      continue;
    const size_t end = events.find_first_of("\r\n", pos);
    std::string_view payload =
        events.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (!payload.empty() && payload.front() == ' ')
      payload.remove_prefix(1);
    if (payload == "[DONE]")
      continue;
    if (const std::optional<int64_t> exact = CompletionTokens(payload)) {
      SetExact(*exact);
    } else if (payload.find("\"choices\"") != std::string_view::npos &&
               payload.find(kRoleOnly) == std::string_view::npos) {
      ++count_;
    }
  }
  return count_ - before;
}

int64_t GeneratedTokens::FeedBody(std::string_view json) {
  const std::optional<int64_t> exact = CompletionTokens(json);
  return exact.has_value() ? SetExact(*exact) : 0;
}

}  // namespace switchyard::router::internal
