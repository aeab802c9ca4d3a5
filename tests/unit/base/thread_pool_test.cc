#include "base/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "base/mutex.h"

namespace switchyard::base {
namespace {

// Runs ParallelFor over n indices and checks that each was visited exactly once.
void ExpectEachIndexOnce(ThreadPool& pool, size_t n) {
  std::vector<std::atomic<int>> hits(n);
  pool.ParallelFor(n, [&](size_t begin, size_t end) {
    ASSERT_LT(begin, end);
    ASSERT_LE(end, n);
    for (size_t i = begin; i < end; ++i)
      hits[i].fetch_add(1);
  });
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (size_t threads : {1u, 3u}) {
    ThreadPool pool(threads, "test");
    for (size_t n : {0u, 1u, 2u, 3u, 7u, 8u, 9u, 100u, 1001u})
      ExpectEachIndexOnce(pool, n);
  }
}

TEST(ThreadPoolTest, ManyBackToBackCalls) {
  // The pattern of a decode step: hundreds of short calls in a row, each one's results
  // read by the caller right after.
  ThreadPool pool(2, "test");
  std::vector<int> out(64, 0);
  for (int round = 1; round <= 2000; ++round) {
    pool.ParallelFor(out.size(), [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i)
        out[i] += 1;
    });
    ASSERT_EQ(out.front(), round);
    ASSERT_EQ(out.back(), round);
  }
}

TEST(ThreadPoolTest, WorkersThatWentToSleepWakeForTheNextCall) {
  ThreadPool pool(2, "test");
  for (int round = 0; round < 3; ++round) {
    ExpectEachIndexOnce(pool, 50);
    // Long enough for the workers to stop spinning and block; correctness must not
    // depend on it, only the path taken does.
    std::this_thread::sleep_for(ThreadPool::kSpinTime * 3);
  }
}

TEST(ThreadPoolTest, ConcurrentCallersEachGetTheirOwnRanges) {
  ThreadPool pool(2, "test");
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&pool, c] {
      for (int round = 0; round < 200; ++round)
        ExpectEachIndexOnce(pool, static_cast<size_t>(10 + c * 7 + round % 5));
    });
  }
  for (std::thread& t : callers)
    t.join();
}

TEST(ThreadPoolTest, SubmitRunsBetweenParallelForCalls) {
  ThreadPool pool(2, "test");
  Mutex mu;
  CondVar cv;
  int done = 0;
  for (int i = 0; i < 20; ++i) {
    ExpectEachIndexOnce(pool, 16);
    pool.Submit([&] {
      MutexLock lock(&mu);
      ++done;
      cv.NotifyAll();
    });
  }
  MutexLock lock(&mu);
  cv.Wait(&mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done == 20; });
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
