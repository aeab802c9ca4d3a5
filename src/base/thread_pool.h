// ThreadPool: a fixed set of named worker threads, sized once (normally to the cores) and
// joined in the destructor. Thread-safe: Submit and ParallelFor may be called from any
// thread except a pool worker (ParallelFor from a worker would wait on itself).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace switchyard::base {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1.
  ThreadPool(size_t num_threads, std::string name);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return workers_.size(); }

  // Runs task on some worker, later.
  void Submit(std::function<void()> task);

  // Calls fn(begin, end) over [0, n) split into about num_threads() contiguous ranges and
  // returns when all calls have returned. The calling thread runs one range itself.
  void ParallelFor(size_t n, const std::function<void(size_t begin, size_t end)>& fn);

 private:
  void WorkerLoop();

  const std::string name_;
  Mutex mu_;
  CondVar work_cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace switchyard::base
