#include "api/internal/number_fault.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>

#include "absl/container/inlined_vector.h"
#include "fmt/format.h"

#include "api/error.h"

namespace switchyard::api::internal {
namespace {

// Root fields our request parsers (completions, chat, tokenize, detokenize) read, where a
// client may put a number (at the top or nested; a wrong one is still named).
constexpr std::string_view kNumberFields[] = {
    "allowed_token_ids",
    "best_of",
    "chat_template_kwargs",
    "frequency_penalty",
    "kv_transfer_params",
    "length_penalty",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "messages",
    "min_p",
    "min_tokens",
    "n",
    "presence_penalty",
    "priority",
    "prompt",
    "prompt_logprobs",
    "repetition_penalty",
    "response_format",
    "seed",
    "stop_token_ids",
    "stream_options",
    "structured_outputs",
    "temperature",
    "tokens",
    "tool_choice",
    "tools",
    "top_k",
    "top_logprobs",
    "top_p",
    "truncate_prompt_tokens",
    "user",
    "model",
    "stop",
};

// Deeper nesting than any request of ours: the scan gives up (the body is refused anyway).
constexpr size_t kMaxDepth = 1024;

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

bool IsNumberChar(char c) {
  return IsDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// Whether `token` is a JSON number (RFC 8259 grammar); sets *integer when it has neither a
// fraction nor an exponent.
bool IsJsonNumber(std::string_view token, bool* integer) {
  size_t i = 0;
  if (i < token.size() && token[i] == '-')
    ++i;
  if (i >= token.size() || !IsDigit(token[i]))
    return false;
  if (token[i] == '0') {
    ++i;
  } else {
    while (i < token.size() && IsDigit(token[i]))
      ++i;
  }
  *integer = true;
  if (i < token.size() && token[i] == '.') {
    *integer = false;
    if (++i >= token.size() || !IsDigit(token[i]))
      return false;
    while (i < token.size() && IsDigit(token[i]))
      ++i;
  }
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    *integer = false;
    ++i;
    if (i < token.size() && (token[i] == '+' || token[i] == '-'))
      ++i;
    if (i >= token.size() || !IsDigit(token[i]))
      return false;
    while (i < token.size() && IsDigit(token[i]))
      ++i;
  }
  return i == token.size();
}

// A fault for a JSON number simdjson cannot hold: an integer outside [-2^63, 2^64) or a
// decimal whose magnitude overflows double.
std::optional<NumberFault> Classify(std::string_view token) {
  bool integer = false;
  if (!IsJsonNumber(token, &integer))
    return std::nullopt;
  const bool negative = token.front() == '-';
  if (integer) {
    const std::string_view digits = token.substr(negative ? 1 : 0);
    const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
    // No leading zeros (the grammar): a longer literal is larger.
    if (digits.size() < limit.size() || (digits.size() == limit.size() && digits <= limit))
      return std::nullopt;
    return NumberFault{.field = {}, .integer = true, .negative = negative};
  }
  const double value = std::strtod(std::string(token).c_str(), nullptr);
  if (std::isfinite(value))
    return std::nullopt;
  return NumberFault{.field = {}, .integer = false, .negative = negative};
}

}  // namespace

std::optional<NumberFault> FindNumberFault(std::string_view json, std::string* zeroed) {
  std::optional<NumberFault> first;
  zeroed->clear();
  size_t copied = 0;  // json[0, copied) is in *zeroed
  // The open containers, true for an object; a string in an object right after '{' or ','
  // is a key.
  absl::InlinedVector<bool, 16> open;
  bool expect_key = false;
  std::string_view field;
  size_t i = 0;
  while (i < json.size()) {
    const char c = json[i];
    if (c == '{' || c == '[') {
      if (open.size() >= kMaxDepth)
        return std::nullopt;
      open.push_back(c == '{');
      expect_key = c == '{';
      ++i;
    } else if (c == '}' || c == ']') {
      if (!open.empty())
        open.pop_back();
      expect_key = false;
      ++i;
    } else if (c == ',') {
      expect_key = !open.empty() && open.back();
      ++i;
    } else if (c == '"') {
      size_t end = i + 1;
      while (end < json.size() && json[end] != '"')
        end += json[end] == '\\' ? 2 : 1;
      if (end >= json.size())
        return std::nullopt;
      if (expect_key && open.size() == 1)
        field = json.substr(i + 1, end - i - 1);
      expect_key = false;
      i = end + 1;
    } else if (c == '-' || IsDigit(c)) {
      size_t end = i;
      while (end < json.size() && IsNumberChar(json[end]))
        ++end;
      if (std::optional<NumberFault> fault = Classify(json.substr(i, end - i))) {
        fault->field = open.empty() ? std::string_view() : field;
        if (!first.has_value())
          first = fault;
        zeroed->append(json.substr(copied, i - copied));
        zeroed->push_back('0');
        copied = end;
      }
      i = end;
    } else {
      ++i;  // whitespace, ':' and the letters of true, false, null
    }
  }
  zeroed->append(json.substr(copied));
  return first;
}

absl::Status NumberFaultError(const NumberFault& fault) {
  const bool known = std::find(std::begin(kNumberFields), std::end(kNumberFields), fault.field) !=
                     std::end(kNumberFields);
  if (!known) {
    return absl::InvalidArgumentError(
        fault.integer ? "Request body has an integer that does not fit in 64 bits."
                      : "Request body has a number beyond the range of a double.");
  }
  const std::string_view f = fault.field;
  if (!fault.integer)
    return InvalidParam(f, fmt::format("{} must be a finite number.", f));
  return InvalidParam(f, fault.negative ? fmt::format("{} must be at least {}.", f, INT64_MIN)
                                        : fmt::format("{} must be at most {}.", f, INT64_MAX));
}

}  // namespace switchyard::api::internal
