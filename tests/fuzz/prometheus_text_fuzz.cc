// Fuzz target: an engine's /metrics text as the router scrapes it (untrusted upstream
// bytes) through the Prometheus parser and every engine kind's extractor.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "router/engine_metrics.h"
#include "router/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto samples = switchyard::router::ParsePrometheusText(text, 10'000);
  if (!samples.ok())
    return 0;
  for (auto kind : {switchyard::router::EngineKind::kVllm, switchyard::router::EngineKind::kSglang,
                    switchyard::router::EngineKind::kLlamaCpp}) {
    (void)switchyard::router::ExtractEndpointMetrics(kind, *samples);
  }
  return 0;
}
