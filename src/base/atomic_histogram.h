// AtomicHistogram: a histogram over fixed buckets that any thread records into without a
// lock (relaxed atomic adds), for observations made on every request. Read copies it out for
// exposition; a read racing with recording may miss observations still in flight, so its
// count and sum can disagree by those few (Prometheus scrapes tolerate that).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace switchyard::base {

class AtomicHistogram {
 public:
  // `upper_bounds`: ascending, finite; a last bucket (+Inf) follows them. A value lands in
  // the first bucket whose bound is >= it, as Prometheus's `le` reads.
  explicit AtomicHistogram(std::vector<double> upper_bounds);
  AtomicHistogram(const AtomicHistogram&) = delete;
  AtomicHistogram& operator=(const AtomicHistogram&) = delete;

  void Observe(double value);

  struct Counts {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= the count)
    double sum = 0;
  };
  Counts Read() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

}  // namespace switchyard::base
