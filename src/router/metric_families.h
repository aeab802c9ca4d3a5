// Prometheus metric families built at scrape time from what the router records lock-free
// (relaxed atomic counters, base::AtomicHistogram), for prometheus-cpp's TextSerializer.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

#include "base/atomic_histogram.h"

namespace switchyard::router {

prometheus::MetricFamily NewFamily(std::string name, std::string help, prometheus::MetricType type);
// A counter's sample.
prometheus::ClientMetric Counted(std::vector<prometheus::ClientMetric::Label> labels,
                                 uint64_t value);
// A gauge's sample.
prometheus::ClientMetric Gauged(std::vector<prometheus::ClientMetric::Label> labels, double value);
// A histogram's sample: the histogram's buckets, cumulative, with +Inf last.
prometheus::ClientMetric Histogram(std::vector<prometheus::ClientMetric::Label> labels,
                                   const base::AtomicHistogram& h);

}  // namespace switchyard::router
