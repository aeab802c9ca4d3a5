#include "base/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3, "test");
  for (size_t n : {0u, 1u, 2u, 3u, 7u, 100u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i)
        hits[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, DestructorRunsQueuedTasks) {
  std::atomic<int> done{0};
  {
    ThreadPool pool(2, "test");
    for (int i = 0; i < 50; ++i)
      pool.Submit([&] { done.fetch_add(1); });
  }
  EXPECT_EQ(done.load(), 50);
}

}  // namespace
}  // namespace switchyard::base
