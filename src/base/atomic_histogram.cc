#include "base/atomic_histogram.h"

#include <algorithm>
#include <utility>

namespace switchyard::base {

AtomicHistogram::AtomicHistogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void AtomicHistogram::Observe(double value) {
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

AtomicHistogram::Counts AtomicHistogram::Read() const {
  Counts counts;
  counts.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    counts.cumulative[i] = total;
  }
  counts.sum = sum_.load(std::memory_order_relaxed);
  return counts;
}

}  // namespace switchyard::base
