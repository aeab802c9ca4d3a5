#include "router/engine_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include "fmt/format.h"

namespace switchyard::router {
namespace {

struct Names {
  std::string_view waiting;
  std::string_view running;
  std::string_view kv_usage;
  std::string_view kv_usage_old;
  std::string_view cache_info;
  std::string_view block_size_label;
  std::string_view num_blocks_label;
};

constexpr Names kVllm = {"vllm:num_requests_waiting",
                         "vllm:num_requests_running",
                         "vllm:kv_cache_usage_perc",
                         "vllm:gpu_cache_usage_perc",
                         "vllm:cache_config_info",
                         "block_size",
                         "num_gpu_blocks"};
constexpr Names kSglang = {"sglang:num_queue_reqs",
                           "sglang:num_running_reqs",
                           "sglang:token_usage",
                           "",
                           "sglang:cache_config_info",
                           "page_size",
                           "num_pages"};
constexpr Names kLlamaCpp = {"llamacpp:requests_deferred",
                             "llamacpp:requests_processing",
                             "llamacpp:kv_cache_usage_ratio",
                             "",
                             "",
                             "",
                             ""};

std::optional<int64_t> ToInt(std::string_view s) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0)
    return std::nullopt;
  return v;
}

int64_t Count(double v) {
  // Gauges arrive as floats; negative or absurd values from a broken peer are clamped.
  if (!(v > 0))
    return 0;
  return v > 1e12 ? int64_t{1'000'000'000'000} : std::lround(v);
}

const Names& NamesOf(EngineKind kind) {
  return kind == EngineKind::kVllm ? kVllm : kind == EngineKind::kSglang ? kSglang : kLlamaCpp;
}

}  // namespace

absl::StatusOr<EngineKind> ParseEngineKind(std::string_view name) {
  if (name == "vllm" || name == "switchyard")
    return EngineKind::kVllm;
  if (name == "sglang")
    return EngineKind::kSglang;
  if (name == "llamacpp" || name == "llama.cpp")
    return EngineKind::kLlamaCpp;
  return absl::InvalidArgumentError(
      fmt::format("engine kind must be vllm, switchyard, sglang or llamacpp, got '{}'", name));
}

std::string_view EngineKindName(EngineKind kind) {
  return kind == EngineKind::kVllm ? "vllm" : kind == EngineKind::kSglang ? "sglang" : "llamacpp";
}

absl::StatusOr<EndpointMetrics> ExtractEndpointMetrics(EngineKind kind,
                                                       const std::vector<PromSample>& samples) {
  const Names& n = NamesOf(kind);
  EndpointMetrics m;
  bool has_waiting = false;
  bool has_running = false;
  std::optional<double> kv;      // the current name, max over series
  std::optional<double> kv_old;  // the deprecated name, used only without the current one
  for (const PromSample& s : samples) {
    if (s.name == n.waiting) {
      m.waiting_requests += Count(s.value);
      has_waiting = true;
    } else if (s.name == n.running) {
      m.running_requests += Count(s.value);
      has_running = true;
    } else if (s.name == n.kv_usage || (!n.kv_usage_old.empty() && s.name == n.kv_usage_old)) {
      const double usage = std::isnan(s.value) ? 0.0 : std::clamp(s.value, 0.0, 1.0);
      std::optional<double>& slot = s.name == n.kv_usage ? kv : kv_old;
      slot = std::max(slot.value_or(0.0), usage);
    } else if (!n.cache_info.empty() && s.name == n.cache_info) {
      if (std::optional<int64_t> bs = ToInt(s.Label(n.block_size_label)); bs && *bs <= 1 << 20)
        m.block_size = static_cast<int32_t>(*bs);
      if (std::optional<int64_t> nb = ToInt(s.Label(n.num_blocks_label)))
        m.num_gpu_blocks = *nb;
    }
  }
  if (!has_waiting)
    return absl::NotFoundError(fmt::format("no {} in the metrics", n.waiting));
  if (!has_running)
    return absl::NotFoundError(fmt::format("no {} in the metrics", n.running));
  m.kv_cache_usage = kv.value_or(kv_old.value_or(0.0));
  m.fresh = true;
  return m;
}

absl::StatusOr<EndpointMetrics> ParseEndpointMetrics(EngineKind kind, std::string_view text) {
  const Names& n = NamesOf(kind);
  absl::StatusOr<std::vector<PromSample>> samples =
      ParsePrometheusText(text, [&n](std::string_view name) {
        return name == n.waiting || name == n.running || name == n.kv_usage ||
               (!n.kv_usage_old.empty() && name == n.kv_usage_old) ||
               (!n.cache_info.empty() && name == n.cache_info);
      });
  if (!samples.ok())
    return samples.status();
  return ExtractEndpointMetrics(kind, *samples);
}

bool ServesNoMetrics(EngineKind kind, int http_status) {
  return kind == EngineKind::kLlamaCpp && (http_status == 404 || http_status == 501);
}

}  // namespace switchyard::router
