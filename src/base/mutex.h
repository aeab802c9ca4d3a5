// Mutex: std::mutex carrying Abseil's thread-safety annotations, so clang's
// -Wthread-safety checks GUARDED_BY fields, while TSan sees a plain std::mutex (Debian's
// prebuilt absl::Mutex gives TSan false races). Thread-safe; not recursive.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace switchyard::base {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Scoped lock over Mutex.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Condition variable bound to a Mutex the caller holds.
class CondVar {
 public:
  // REQUIRES: *mu is held by the caller. Returns with it held again.
  template <typename Pred>
  void Wait(Mutex* mu, Pred pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock, pred);
    lock.release();
  }
  // As Wait, but gives up at `deadline`. Returns pred() (false: timed out).
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline, Pred pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool ok = cv_.wait_until(lock, deadline, pred);
    lock.release();
    return ok;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace switchyard::base
