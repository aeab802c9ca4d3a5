// EventLoop: one io_context run by one owned, named thread (the server's "sy-http-N", the
// client's "sy-httpc-N", or a shared EventLoops'). Connections, timers and the acceptor
// live on a loop; other threads reach them only through its LoopPoster.
//
// LoopPoster is the loop's shared, thread-safe doorway: responders keep it (not the
// io_context) so that a responder outliving the server posts nothing once the loop is
// closed, instead of touching a destroyed io_context.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "net/internal/beast.h"

namespace switchyard::net::internal {

class LoopPoster {
 public:
  explicit LoopPoster(asio::io_context* context) : context_(context) {}

  // Queues fn to run on the loop, after everything posted before it. Returns false, and
  // drops fn, once Close() was called. Thread-safe. F may be move-only.
  template <typename F>
  bool Post(F&& fn) {
    base::MutexLock lock(&mu_);
    if (context_ == nullptr)
      return false;
    asio::post(*context_, std::forward<F>(fn));
    return true;
  }

  // Refuses every later Post. Thread-safe, idempotent.
  void Close() {
    base::MutexLock lock(&mu_);
    context_ = nullptr;
  }

 private:
  base::Mutex mu_;
  asio::io_context* context_ ABSL_GUARDED_BY(mu_);
};

class EventLoop {
 public:
  // Starts the thread, named `thread_name` (cut to Linux's 15 bytes).
  explicit EventLoop(const std::string& thread_name);
  // Stops the loop if Stop() was not called.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // The loop whose thread calls this, or nullptr on any other thread.
  static EventLoop* Current();

  // For sockets and timers on this loop. A socket is opened (or assigned), used and closed
  // only on the loop's thread: the io_context does not lock sockets (see context_).
  asio::io_context& context() { return context_; }
  const std::shared_ptr<LoopPoster>& poster() const { return poster_; }

  // Runs fn on the loop and returns once it ran; returns at once when the loop is closed.
  // REQUIRES: not called on this loop's thread.
  void RunAndWait(std::function<void()> fn);

  // Closes the poster, lets everything already posted run, then stops the io_context and
  // joins the thread. Objects still on the loop are destroyed with the EventLoop.
  // REQUIRES: not called on this loop's thread. Idempotent.
  void Stop();

 private:
  // One thread runs the loop, and every socket of the loop is opened, registered, used and
  // closed on that thread (others post to it), so asio's reactor need not lock each socket's
  // state per operation; posting from other threads stays safe (the scheduler still locks).
  asio::io_context context_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<LoopPoster> poster_;
  std::thread thread_;
};

}  // namespace switchyard::net::internal
