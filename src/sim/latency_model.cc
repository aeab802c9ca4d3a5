#include "sim/latency_model.h"

#include <array>
#include <charconv>
#include <cmath>

#include "fmt/format.h"

namespace switchyard::sim {
namespace {

struct Field {
  std::string_view key;
  double LatencyParams::*member;
};

constexpr std::array<Field, 4> kFields = {{
    {"overhead_ms", &LatencyParams::overhead_ms},
    {"prefill_us_per_token", &LatencyParams::prefill_us_per_token},
    {"decode_ms_per_seq", &LatencyParams::decode_ms_per_seq},
    {"attention_us_per_context_token", &LatencyParams::attention_us_per_context_token},
}};

std::string KnownKeys() {
  std::string keys;
  for (const Field& f : kFields) {
    keys += fmt::format("{}{}", keys.empty() ? "" : ", ", f.key);
  }
  return keys;
}

absl::Status BadItem(std::string_view item, std::string_view why) {
  return absl::InvalidArgumentError(
      fmt::format("latency model: item '{}': {} (keys: {}; or 'zero')", item, why, KnownKeys()));
}

}  // namespace

absl::StatusOr<LatencyParams> ParseLatencyParams(std::string_view spec) {
  LatencyParams params;
  std::array<bool, kFields.size()> seen{};
  size_t pos = 0;
  while (pos <= spec.size() && !spec.empty()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) {
      comma = spec.size();
    }
    const std::string_view item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item == "zero") {
      params = LatencyParams::Zero();
      continue;
    }
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return BadItem(item, "expected key=value");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view text = item.substr(eq + 1);
    size_t index = 0;
    while (index < kFields.size() && kFields[index].key != key) {
      ++index;
    }
    if (index == kFields.size()) {
      return BadItem(item, "unknown key");
    }
    if (seen[index]) {
      return BadItem(item, "key given twice");
    }
    seen[index] = true;
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      return BadItem(item, "not a number");
    }
    if (!std::isfinite(value) || value < 0) {
      return BadItem(item, "must be finite and >= 0");
    }
    params.*kFields[index].member = value;
  }
  return params;
}

StepShape ShapeOf(std::span<const runtime::AttentionSequence> sequences, int64_t window) {
  StepShape shape;
  for (const runtime::AttentionSequence& s : sequences) {
    if (s.q_len == 1 && s.context_len > 1) {
      ++shape.decode_seqs;
    } else {
      shape.prefill_tokens += s.q_len;
    }
    shape.context_tokens += s.context_len - s.WindowStart(0, window);
  }
  return shape;
}

std::chrono::nanoseconds StepLatency(const LatencyParams& params, const StepShape& shape) {
  const double ns =
      params.overhead_ms * 1e6 +
      params.prefill_us_per_token * 1e3 * static_cast<double>(shape.prefill_tokens) +
      params.decode_ms_per_seq * 1e6 * static_cast<double>(shape.decode_seqs) +
      params.attention_us_per_context_token * 1e3 * static_cast<double>(shape.context_tokens);
  return std::chrono::nanoseconds(std::llround(ns));
}

}  // namespace switchyard::sim
