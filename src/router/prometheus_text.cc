#include "router/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "fmt/format.h"

namespace switchyard::router {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool IsNameChar(char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9');
}

void SkipSpaces(std::string_view line, size_t* i) {
  while (*i < line.size() && (line[*i] == ' ' || line[*i] == '\t'))
    ++*i;
}

absl::Status LineError(size_t line_no, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("line {}: {}", line_no, what));
}

bool ParseValue(std::string_view token, double* out) {
  if (token == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (token == "+Inf" || token == "Inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (token == "-Inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (token.empty() || token.size() > 64)
    return false;
  const std::string copy(token);  // strtod needs a terminator
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && std::isfinite(*out);
}

absl::Status ParseLabels(std::string_view line, size_t line_no, size_t* i, PromSample* sample) {
  ++*i;  // '{'
  for (;;) {
    SkipSpaces(line, i);
    if (*i < line.size() && line[*i] == '}') {
      ++*i;
      return absl::OkStatus();
    }
    const size_t start = *i;
    while (*i < line.size() && IsNameChar(line[*i]))
      ++*i;
    if (*i == start)
      return LineError(line_no, "expected a label name");
    std::string key(line.substr(start, *i - start));
    SkipSpaces(line, i);
    if (*i >= line.size() || line[*i] != '=')
      return LineError(line_no, "expected '=' after a label name");
    ++*i;
    SkipSpaces(line, i);
    if (*i >= line.size() || line[*i] != '"')
      return LineError(line_no, "expected a quoted label value");
    ++*i;
    std::string value;
    for (;;) {
      if (*i >= line.size())
        return LineError(line_no, "unterminated label value");
      const char c = line[(*i)++];
      if (c == '"')
        break;
      if (c != '\\') {
        value.push_back(c);
        continue;
      }
      if (*i >= line.size())
        return LineError(line_no, "unterminated escape");
      const char e = line[(*i)++];
      if (e == 'n') {
        value.push_back('\n');
      } else if (e == '\\' || e == '"') {
        value.push_back(e);
      } else {
        return LineError(line_no, "bad escape in a label value");
      }
    }
    sample->labels.emplace_back(std::move(key), std::move(value));
    SkipSpaces(line, i);
    if (*i < line.size() && line[*i] == ',')
      ++*i;
    else if (*i >= line.size() || line[*i] != '}')
      return LineError(line_no, "expected ',' or '}' after a label");
  }
}

}  // namespace

std::string_view PromSample::Label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key)
      return v;
  }
  return {};
}

absl::StatusOr<std::vector<PromSample>> ParsePrometheusText(std::string_view text,
                                                            size_t max_samples) {
  std::vector<PromSample> samples;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    size_t i = 0;
    SkipSpaces(line, &i);
    if (i == line.size() || line[i] == '#')
      continue;
    if (samples.size() >= max_samples) {
      return absl::ResourceExhaustedError(
          fmt::format("more than {} samples in the metrics text", max_samples));
    }
    PromSample sample;
    if (!IsNameStart(line[i]))
      return LineError(line_no, "expected a metric name");
    const size_t start = i;
    while (i < line.size() && IsNameChar(line[i]))
      ++i;
    sample.name = std::string(line.substr(start, i - start));
    SkipSpaces(line, &i);
    if (i < line.size() && line[i] == '{') {
      absl::Status labels = ParseLabels(line, line_no, &i, &sample);
      if (!labels.ok())
        return labels;
    }
    SkipSpaces(line, &i);
    const size_t value_start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    if (!ParseValue(line.substr(value_start, i - value_start), &sample.value))
      return LineError(line_no, "expected a number");
    SkipSpaces(line, &i);
    // An optional integer timestamp.
    const size_t ts_start = i;
    if (i < line.size() && line[i] == '-')
      ++i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9')
      ++i;
    if (i == ts_start && i < line.size())
      return LineError(line_no, "unexpected text after the value");
    SkipSpaces(line, &i);
    if (i != line.size())
      return LineError(line_no, "unexpected text after the value");
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace switchyard::router
