// ParsePrometheusText: the Prometheus text exposition format (0.0.4), as engines serve it
// on /metrics, parsed into samples. Input is untrusted (any upstream's bytes): every line is
// bounded, malformed lines are errors naming the line, and nothing is allocated beyond the
// input's size. Comments (# HELP / # TYPE) are skipped; timestamps are accepted and ignored.
// A scraper that wants a few series out of hundreds (an engine's histograms) passes a name
// filter: the other lines are read only up to where their metric name ends, so a scrape
// costs about one pass over the bytes and a series the scraper does not use (a new metric,
// an OpenMetrics exemplar) cannot fail it.
// Stateless; any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::router {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in line order, unescaped
  double value = 0;

  // The value of label `key`; empty when absent.
  std::string_view Label(std::string_view key) const;
};

// InvalidArgument ("line 12: ...") for malformed input; ResourceExhausted when the text
// holds more than max_samples samples.
absl::StatusOr<std::vector<PromSample>> ParsePrometheusText(std::string_view text,
                                                            size_t max_samples = 100'000);

// The same, returning only the samples whose name `keep` accepts, and checking only their
// lines past the name (max_samples still counts every sample line in the text).
absl::StatusOr<std::vector<PromSample>> ParsePrometheusText(
    std::string_view text, const std::function<bool(std::string_view name)>& keep,
    size_t max_samples = 100'000);

}  // namespace switchyard::router
