#include "router/metric_families.h"

#include <limits>
#include <utility>

namespace switchyard::router {

prometheus::MetricFamily NewFamily(std::string name, std::string help,
                                   prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

prometheus::ClientMetric Counted(std::vector<prometheus::ClientMetric::Label> labels,
                                 uint64_t value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = static_cast<double>(value);
  return metric;
}

prometheus::ClientMetric Gauged(std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

prometheus::ClientMetric Histogram(std::vector<prometheus::ClientMetric::Label> labels,
                                   const base::AtomicHistogram& h) {
  const base::AtomicHistogram::Counts counts = h.Read();
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = counts.cumulative.back();
  metric.histogram.sample_sum = counts.sum;
  const std::vector<double>& bounds = h.upper_bounds();
  metric.histogram.bucket.reserve(counts.cumulative.size());
  for (size_t i = 0; i < counts.cumulative.size(); ++i) {
    const double bound = i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity();
    metric.histogram.bucket.push_back({counts.cumulative[i], bound});
  }
  return metric;
}

}  // namespace switchyard::router
