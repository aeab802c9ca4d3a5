// EndpointWaiters: the router's requests waiting on one endpoint with nothing sent to their
// client yet (a buffered response, a stream before its first data event), so that when the
// endpoint goes down they leave it at once: each waiter's upstream attempt is cancelled (the
// engine sees the disconnect) and its ProxyCall retries elsewhere. A SIGSTOPped engine keeps
// its connections open and answers nothing, so without this a request on it waits for its
// whole timeout; the endpoint table notices the engine in seconds (failed scrapes) or
// outlier detection ejects it, and calls Down.
//
// A waiter is a node inside its ProxyCall (an intrusive list): waiting allocates nothing.
//
// Threads: any. One mutex, a leaf lock: Down only posts cancellations
// (net::HttpRequestHandle::Cancel posts to the request's loop), it never runs a waiter's code,
// so a caller may hold its own locks (ProxyCall's, the endpoint table's) around every method.
#pragma once

#include <memory>

#include "base/mutex.h"
#include "net/http_client.h"

namespace switchyard::router {

class EndpointWaiters;

// One request's wait on one endpoint. Owned by the request; its fields belong to the
// EndpointWaiters it is on (their mutex guards them).
class EndpointWaiter {
 public:
  EndpointWaiter() = default;
  EndpointWaiter(const EndpointWaiter&) = delete;
  EndpointWaiter& operator=(const EndpointWaiter&) = delete;

 private:
  friend class EndpointWaiters;
  EndpointWaiter* prev_ = nullptr;
  EndpointWaiter* next_ = nullptr;
  const EndpointWaiters* on_ = nullptr;  // the list it is on; null when on none
  bool woken_ = false;                   // Down cancelled its attempt
  std::shared_ptr<net::HttpRequestHandle> attempt_;
};

class EndpointWaiters {
 public:
  EndpointWaiters() = default;
  EndpointWaiters(const EndpointWaiters&) = delete;
  EndpointWaiters& operator=(const EndpointWaiters&) = delete;

  // `waiter` waits on the endpoint; `attempt` cancels its upstream call. When the endpoint is
  // down already (the request picked it from a snapshot taken before it went down), the
  // attempt is cancelled at once and the waiter woken. REQUIRES: `waiter` is on no list.
  void Add(EndpointWaiter* waiter, std::shared_ptr<net::HttpRequestHandle> attempt);
  // Ends the wait (the attempt ended, or its first byte goes to the client). Returns whether
  // the waiter was woken: its attempt is cancelled (or being cancelled), and what it has of
  // the response must not reach the client. Harmless on a waiter already removed or woken.
  // REQUIRES: `waiter` was added to this list, if to any, since it was last removed.
  bool Remove(EndpointWaiter* waiter);
  // The endpoint went down: every waiter is woken and its attempt cancelled, and so is each
  // one added until Up.
  void Down();
  // The endpoint is back in the routing set.
  void Up();

 private:
  mutable base::Mutex mu_;
  EndpointWaiter* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace switchyard::router
