#include "base/thread_name.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace switchyard::base {
namespace {

std::string NameOf(pthread_t thread) {
  char name[32] = {};
  EXPECT_EQ(pthread_getname_np(thread, name, sizeof(name)), 0);
  return name;
}

TEST(ThreadNameTest, LongNamesAreCutToLinuxsFifteenBytes) {
  std::string seen;
  std::thread worker([&seen] {
    SetCurrentThreadName("sy-a-name-much-longer-than-fifteen");
    seen = NameOf(pthread_self());
  });
  worker.join();
  EXPECT_EQ(seen, "sy-a-name-much-");
}

TEST(ThreadNameTest, NamesAnotherThread) {
  bool go = false;
  std::mutex mu;
  std::condition_variable cv;
  std::thread worker([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return go; });
  });
  SetThreadName(worker, "sy-short");
  EXPECT_EQ(NameOf(worker.native_handle()), "sy-short");
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_one();
  worker.join();
}

}  // namespace
}  // namespace switchyard::base
