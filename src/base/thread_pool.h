// ThreadPool: a fixed set of named worker threads, sized once and joined in the destructor.
//
// Two ways in:
// - Submit(task) queues a task for some worker (mutex-protected queue, condition variable).
// - ParallelFor(n, fn) is built for a compute pool that runs hundreds of short calls per
//   decoded token. The calling thread and the workers claim chunks of [0, n) from one atomic
//   counter until none is left, so a descheduled thread delays a call by at most the chunk it
//   holds, not by a fixed share of the work. A call publishes itself by bumping an atomic
//   generation; after each call, workers spin on that generation for a short while
//   (kSpinTime) before blocking on the condition variable, so back-to-back calls reach them
//   without a syscall or a lock. A task submitted while workers spin waits for the spin to
//   end (at most kSpinTime).
//
// Threads: Submit and ParallelFor may be called from any thread except a pool worker
// (ParallelFor from a worker would wait on itself). Concurrent ParallelFor calls run one
// after the other.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace switchyard::base {

class ThreadPool {
 public:
  // How long an idle worker polls for the next ParallelFor before it blocks.
  static constexpr std::chrono::microseconds kSpinTime{200};

  // REQUIRES: num_threads >= 1.
  ThreadPool(size_t num_threads, std::string name);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Worker threads; ParallelFor runs on up to num_threads() + 1 threads (the caller's too).
  size_t num_threads() const { return workers_.size(); }

  // Runs task on some worker, later.
  void Submit(std::function<void()> task);

  // Calls fn(begin, end) over [0, n) split into contiguous chunks (a few per thread) and
  // returns when all calls have returned. The calling thread runs chunks too; which thread
  // runs which chunk is not specified.
  void ParallelFor(size_t n, const std::function<void(size_t begin, size_t end)>& fn);

 private:
  void WorkerLoop();
  // Whether a ParallelFor job newer than `seen` is open (an odd generation).
  bool JobOpen(uint64_t seen) const;
  // Joins the job of generation `gen` unless it has closed meanwhile.
  void JoinJob(uint64_t gen);
  // Claims and runs chunks of the open job until none is left.
  void RunChunks(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunk);

  const std::string name_;
  Mutex mu_;
  CondVar work_cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Workers blocked on work_cv_. Changed under mu_; ParallelFor reads it without mu_ to skip
  // the lock and the notify when every worker is spinning.
  std::atomic<size_t> sleepers_{0};

  // The ParallelFor job. A caller (one at a time, under parallel_mu_) writes job_fn_,
  // job_n_ and job_chunk_, resets next_chunk_, then makes job_gen_ odd (open); when it has
  // run out of chunks it makes job_gen_ even (closed) and waits for active_ to drop to 0.
  // A worker enters by incrementing active_ and then re-reading job_gen_: only if the job
  // is still open does it read the job fields. Both sides use sequentially consistent
  // operations on job_gen_ and active_, so either the caller sees the worker in active_ or
  // the worker sees the job closed; the fields are therefore never read while being
  // rewritten.
  Mutex parallel_mu_;
  std::atomic<uint64_t> job_gen_{0};
  std::atomic<size_t> active_{0};
  std::atomic<size_t> next_chunk_{0};
  const std::function<void(size_t, size_t)>* job_fn_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;

  std::vector<std::thread> workers_;
};

}  // namespace switchyard::base
