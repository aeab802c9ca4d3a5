#include "base/thread_pool.h"

#include <algorithm>
#include <utility>

#include "base/logging.h"
#include "base/thread_name.h"

namespace switchyard::base {
namespace {

// Chunks per participating thread: enough that a thread which loses its core mid-call
// leaves little for the others to wait on, few enough that claiming stays cheap.
constexpr size_t kChunksPerThread = 4;

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls done() with CPU pauses in between for up to `limit`; returns its last answer.
template <typename Pred>
bool SpinUntil(Pred done, std::chrono::microseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done())
        return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(size_t num_threads, std::string name) : name_(std::move(name)) {
  SY_CHECK(num_threads >= 1);
  workers_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
    SetThreadName(workers_.back(), name_ + "-" + std::to_string(i));
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

bool ThreadPool::JobOpen(uint64_t seen) const {
  const uint64_t gen = job_gen_.load(std::memory_order_relaxed);
  return gen % 2 == 1 && gen != seen;
}

void ThreadPool::WorkerLoop() {
  // The newest job generation this worker has joined (or found closed): it never joins a
  // job twice.
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = 0;
    const bool job = SpinUntil(
        [&] {
          gen = job_gen_.load(std::memory_order_relaxed);
          return gen % 2 == 1 && gen != seen;
        },
        kSpinTime);
    if (job) {
      seen = gen;
      JoinJob(gen);
      continue;
    }
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      sleepers_.fetch_add(1);
      work_cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty() || JobOpen(seen);
      });
      sleepers_.fetch_sub(1);
      // A job goes first (the spin at the top joins it); queued tasks are drained before
      // stopping so that no submitted task is silently dropped.
      if (!JobOpen(seen)) {
        if (queue_.empty())
          return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (task)
      task();
  }
}

void ThreadPool::JoinJob(uint64_t gen) {
  active_.fetch_add(1);
  if (job_gen_.load() == gen)
    RunChunks(*job_fn_, job_n_, job_chunk_);
  active_.fetch_sub(1);
}

void ThreadPool::RunChunks(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunk) {
  while (true) {
    const size_t begin = next_chunk_.fetch_add(1, std::memory_order_relaxed) * chunk;
    if (begin >= n)
      return;
    fn(begin, std::min(n, begin + chunk));
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0)
    return;
  const size_t num_chunks = std::min(n, (workers_.size() + 1) * kChunksPerThread);
  const size_t chunk = (n + num_chunks - 1) / num_chunks;
  if (chunk >= n) {
    fn(0, n);
    return;
  }
  MutexLock serial(&parallel_mu_);
  job_fn_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  next_chunk_.store(0, std::memory_order_relaxed);
  const uint64_t gen = job_gen_.load(std::memory_order_relaxed) + 1;
  job_gen_.store(gen);
  if (sleepers_.load() > 0) {
    // A worker checks for the job under mu_ before it blocks, so once we have held mu_ it
    // either saw the job or is waiting and gets the notification.
    { MutexLock lock(&mu_); }
    work_cv_.NotifyAll();
  }
  RunChunks(fn, n, chunk);
  job_gen_.store(gen + 1);
  // Workers still inside hold chunks that are running; wait for them, yielding the core if
  // one of them has lost its own.
  if (!SpinUntil([this] { return active_.load() == 0; }, kSpinTime)) {
    while (active_.load() != 0)
      std::this_thread::yield();
  }
}

}  // namespace switchyard::base
