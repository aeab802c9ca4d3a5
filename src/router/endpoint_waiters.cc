#include "router/endpoint_waiters.h"

#include <utility>

namespace switchyard::router {

void EndpointWaiters::Add(EndpointWaiter* waiter, std::shared_ptr<net::HttpRequestHandle> attempt) {
  base::MutexLock lock(&mu_);
  if (down_) {
    waiter->woken_ = true;
    attempt->Cancel();
    return;
  }
  waiter->on_ = this;
  waiter->woken_ = false;
  waiter->attempt_ = std::move(attempt);
  waiter->prev_ = nullptr;
  waiter->next_ = head_;
  if (head_ != nullptr)
    head_->prev_ = waiter;
  head_ = waiter;
}

bool EndpointWaiters::Remove(EndpointWaiter* waiter) {
  base::MutexLock lock(&mu_);
  const bool woken = waiter->woken_;
  waiter->woken_ = false;
  if (waiter->on_ != this)
    return woken;
  if (waiter->prev_ != nullptr)
    waiter->prev_->next_ = waiter->next_;
  else
    head_ = waiter->next_;
  if (waiter->next_ != nullptr)
    waiter->next_->prev_ = waiter->prev_;
  waiter->prev_ = waiter->next_ = nullptr;
  waiter->on_ = nullptr;
  waiter->attempt_ = nullptr;
  return woken;
}

void EndpointWaiters::Down() {
  base::MutexLock lock(&mu_);
  down_ = true;
  while (head_ != nullptr) {
    EndpointWaiter* waiter = head_;
    head_ = waiter->next_;
    waiter->prev_ = waiter->next_ = nullptr;
    waiter->on_ = nullptr;
    waiter->woken_ = true;
    // Posted to the attempt's loop: its OnDone(Cancelled) comes later, outside this lock.
    std::shared_ptr<net::HttpRequestHandle> attempt = std::move(waiter->attempt_);
    attempt->Cancel();
  }
}

void EndpointWaiters::Up() {
  base::MutexLock lock(&mu_);
  down_ = false;
}

}  // namespace switchyard::router
