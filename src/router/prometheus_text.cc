#include "router/prometheus_text.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "fmt/format.h"

namespace switchyard::router {
namespace {

// Character classes by table: every byte of every scrape goes through these.
constexpr uint8_t kNameStart = 1;
constexpr uint8_t kNameChar = 2;
constexpr std::array<uint8_t, 256> CharClasses() {
  std::array<uint8_t, 256> table{};
  for (int c = 0; c < 256; ++c) {
    const bool start = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    table[c] = static_cast<uint8_t>((start ? kNameStart | kNameChar : 0) | (digit ? kNameChar : 0));
  }
  return table;
}
constexpr std::array<uint8_t, 256> kCharClasses = CharClasses();

bool IsNameStart(char c) {
  return (kCharClasses[static_cast<unsigned char>(c)] & kNameStart) != 0;
}
bool IsNameChar(char c) {
  return (kCharClasses[static_cast<unsigned char>(c)] & kNameChar) != 0;
}

// Where the metric name starting at line[i] ends: the first '{', ' ' or '\t' from i, or
// the line's end. Sixteen bytes a step where they are there: most lines of a scrape are
// skipped after this.
size_t NameEnd(std::string_view line, size_t i) {
#if defined(__SSE2__)
  const __m128i brace = _mm_set1_epi8('{');
  const __m128i space = _mm_set1_epi8(' ');
  const __m128i tab = _mm_set1_epi8('\t');
  for (; i + 16 <= line.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(line.data() + i));
    const __m128i hit = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, brace), _mm_cmpeq_epi8(v, space)), _mm_cmpeq_epi8(v, tab));
    if (const int mask = _mm_movemask_epi8(hit); mask != 0)
      return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t')
    ++i;
  return i;
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
  // from_chars reads the usual forms without a copy; what it does not take whole (a leading
  // '+', a hex float) goes to strtod, which needs a terminated copy.
  const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), *out);
  if (ec == std::errc() && ptr == token.data() + token.size())
    return std::isfinite(*out);
  const std::string copy(token);
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && std::isfinite(*out);
}

// One label as it stands in the line: the value still escaped.
struct RawLabel {
  std::string_view key;
  std::string_view value;
  bool escaped = false;
};

std::string Unescape(const RawLabel& label) {
  if (!label.escaped)
    return std::string(label.value);
  std::string out;
  out.reserve(label.value.size());
  for (size_t i = 0; i < label.value.size(); ++i) {
    const char c = label.value[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    // ScanLabels let only \n, \\ and \" through.
    const char e = label.value[++i];
    out.push_back(e == 'n' ? '\n' : e);
  }
  return out;
}

absl::Status ScanLabels(std::string_view line, size_t line_no, size_t* i,
                        std::vector<RawLabel>* labels) {
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
    RawLabel label;
    label.key = line.substr(start, *i - start);
    SkipSpaces(line, i);
    if (*i >= line.size() || line[*i] != '=')
      return LineError(line_no, "expected '=' after a label name");
    ++*i;
    SkipSpaces(line, i);
    if (*i >= line.size() || line[*i] != '"')
      return LineError(line_no, "expected a quoted label value");
    ++*i;
    const size_t value_start = *i;
    for (;;) {
      while (*i < line.size() && line[*i] != '"' && line[*i] != '\\')
        ++*i;
      if (*i >= line.size())
        return LineError(line_no, "unterminated label value");
      const char c = line[(*i)++];
      if (c == '"')
        break;
      if (*i >= line.size())
        return LineError(line_no, "unterminated escape");
      const char e = line[(*i)++];
      if (e != 'n' && e != '\\' && e != '"')
        return LineError(line_no, "bad escape in a label value");
      label.escaped = true;
    }
    label.value = line.substr(value_start, *i - 1 - value_start);
    labels->push_back(label);
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
  return ParsePrometheusText(
      text, [](std::string_view) { return true; }, max_samples);
}

absl::StatusOr<std::vector<PromSample>> ParsePrometheusText(
    std::string_view text, const std::function<bool(std::string_view name)>& keep,
    size_t max_samples) {
  std::vector<PromSample> samples;
  std::vector<RawLabel> labels;  // the current line's, reused
  size_t num_samples = 0;
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
    if (num_samples >= max_samples) {
      return absl::ResourceExhaustedError(
          fmt::format("more than {} samples in the metrics text", max_samples));
    }
    ++num_samples;
    const size_t start = i;
    i = NameEnd(line, i);
    if (i == start)
      return LineError(line_no, "expected a metric name");
    const std::string_view name = line.substr(start, i - start);
    // Another series' line is not read past its name: what it holds (labels, value,
    // exemplar) is nothing to this scrape, and no reason to fail it.
    if (!keep(name))
      continue;
    if (!IsNameStart(name[0]) || !std::all_of(name.begin() + 1, name.end(), IsNameChar))
      return LineError(line_no, "expected a metric name");
    labels.clear();
    SkipSpaces(line, &i);
    if (i < line.size() && line[i] == '{') {
      absl::Status status = ScanLabels(line, line_no, &i, &labels);
      if (!status.ok())
        return status;
    }
    SkipSpaces(line, &i);
    const size_t value_start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    double value = 0;
    if (!ParseValue(line.substr(value_start, i - value_start), &value))
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
    PromSample& sample = samples.emplace_back();
    sample.name = std::string(name);
    sample.labels.reserve(labels.size());
    for (const RawLabel& label : labels)
      sample.labels.emplace_back(std::string(label.key), Unescape(label));
    sample.value = value;
  }
  return samples;
}

}  // namespace switchyard::router
