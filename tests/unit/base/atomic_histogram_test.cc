#include "base/atomic_histogram.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

TEST(AtomicHistogramTest, ValuesLandInTheFirstBucketTheyDoNotExceed) {
  AtomicHistogram h({0.1, 1.0, 10.0});
  h.Observe(0.05);
  h.Observe(0.1);  // on a bound: that bucket (le is inclusive)
  h.Observe(0.5);
  h.Observe(10.0);
  h.Observe(11.0);  // past the last bound: +Inf only
  const AtomicHistogram::Counts c = h.Read();
  EXPECT_EQ(c.cumulative, (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(c.sum, 21.65);
  EXPECT_EQ(h.upper_bounds(), (std::vector<double>{0.1, 1.0, 10.0}));
}

TEST(AtomicHistogramTest, EmptyReadsZero) {
  const AtomicHistogram h({1.0});
  const AtomicHistogram::Counts c = h.Read();
  EXPECT_EQ(c.cumulative, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(c.sum, 0);
}

TEST(AtomicHistogramTest, ConcurrentObservationsAllCount) {
  AtomicHistogram h({1.0, 2.0});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < kPerThread; ++i)
        h.Observe(t % 2 == 0 ? 0.5 : 1.5);
    });
  }
  for (std::thread& t : threads)
    t.join();
  const AtomicHistogram::Counts c = h.Read();
  EXPECT_EQ(c.cumulative, (std::vector<uint64_t>{2 * kPerThread, 4 * kPerThread, 4 * kPerThread}));
  EXPECT_DOUBLE_EQ(c.sum, 2.0 * kPerThread * (0.5 + 1.5));
}

}  // namespace
}  // namespace switchyard::base
