#include "base/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "base/logging.h"

namespace switchyard::base {

ThreadPool::ThreadPool(size_t num_threads, std::string name) : name_(std::move(name)) {
  SY_CHECK(num_threads >= 1);
  workers_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
    // Linux limits thread names to 15 bytes.
    const std::string thread_name = (name_ + "-" + std::to_string(i)).substr(0, 15);
    pthread_setname_np(workers_.back().native_handle(), thread_name.c_str());
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_cv_.NotifyAll();
  for (auto& worker : workers_)
    worker.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
  }
  work_cv_.NotifyOne();
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      work_cv_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      });
      // Drain queued work before stopping so no submitted task is silently dropped.
      if (queue_.empty())
        return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0)
    return;
  const size_t num_chunks = std::min(n, workers_.size());
  const size_t chunk = (n + num_chunks - 1) / num_chunks;
  Mutex done_mu;
  CondVar done_cv;
  size_t remaining = 0;
  for (size_t begin = chunk; begin < n; begin += chunk) {
    const size_t end = std::min(n, begin + chunk);
    {
      MutexLock lock(&done_mu);
      ++remaining;
    }
    Submit([&, begin, end] {
      fn(begin, end);
      MutexLock lock(&done_mu);
      if (--remaining == 0)
        done_cv.NotifyAll();
    });
  }
  fn(0, std::min(n, chunk));
  MutexLock lock(&done_mu);
  done_cv.Wait(&done_mu, [&] { return remaining == 0; });
}

}  // namespace switchyard::base
