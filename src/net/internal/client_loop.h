// ClientLoop: what one HttpClient keeps on one event loop (its own "sy-httpc-N", or one of a
// shared EventLoops'): its keep-alive ConnectionPool and its calls in flight, so that Stop
// can cancel them, and its own LoopPoster, which Stop closes so that nothing of this
// client's is posted to the loop after it stopped.
//
// Threads: options(), poster() and OnLoopThread() from any thread; pool(), stopping(), Add
// and Remove on the loop's thread; Stop from the client's controlling thread.
//
// Ownership: HttpClient owns its ClientLoops and the loops they run on (or a share of
// them). A ClientLoop holds each call in flight from Add until Remove; the pool and the
// calls are destroyed before the io_context they use.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "net/http_client.h"
#include "net/internal/beast.h"
#include "net/internal/client_pool.h"
#include "net/internal/deadline.h"
#include "net/internal/event_loop.h"
#include "net/internal/spares.h"

namespace switchyard::net::internal {

class ClientCall;

// A call's deadline on a timer that outlives the call: when the call ends, its loop keeps
// the timer for the next call with its wait still pending, rather than cancelling that wait
// (a reactor operation under its lock, and a completion to run). The next call's deadline is
// most often later than that wait, which then only looks again when it ends: a call costs no
// timer operation and no lookup of asio's timer service. Pending waits hold the CallTimer,
// never the call; on_expiry is set only while a call has the timer. Loop thread only.
struct CallTimer {
  explicit CallTimer(const Executor& executor)
      : deadline(executor, [this] {
          // A copy: the call's OnDeadline ends the call, which unsets on_expiry.
          if (const std::function<void()> run = on_expiry)
            run();
        }) {}
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

  Deadline deadline;
  std::function<void()> on_expiry;
};

class ClientLoop {
 public:
  // `options` and `loop` must outlive the ClientLoop.
  ClientLoop(EventLoop* loop, const HttpClientOptions& options);
  ~ClientLoop();
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;

  const HttpClientOptions& options() const { return options_; }
  const std::shared_ptr<LoopPoster>& poster() const { return poster_; }
  asio::io_context& context() { return loop_->context(); }

  // True on the loop's thread.
  bool OnLoopThread() const { return EventLoop::Current() == loop_; }

  ConnectionPool& pool() { return pool_; }
  // Set once Stop began: a call starting now is cancelled at once.
  bool stopping() const { return stopping_; }
  void Add(std::shared_ptr<ClientCall> call);
  void Remove(ClientCall* call);

  // A call's read buffer: one a finished call gave back, or a new one. A call reads in
  // 16 KiB steps; allocating and freeing that much per request costs more than parsing a
  // small response.
  beast::flat_buffer TakeReadBuffer();
  void GiveBackReadBuffer(beast::flat_buffer buffer);
  // A call's timer: one a finished call gave back (disarmed, with on_expiry unset), or a new
  // one.
  std::shared_ptr<CallTimer> TakeTimer();
  void GiveBackTimer(std::shared_ptr<CallTimer> timer);
  // A call's response header list: one a finished call gave back, whose strings keep their
  // room for the next response's fields (ResponseParser), or an empty one.
  HeaderList TakeHeaderList();
  void GiveBackHeaderList(HeaderList headers);

  // Refuses further posts, cancels every call in flight (each OnDone runs, on the loop) and
  // closes the pool; returns once everything this client posted to the loop before has run,
  // so that none of its handlers runs later. The loop keeps running. Idempotent.
  // REQUIRES: not called on this loop's thread.
  void Stop();

 private:
  const HttpClientOptions& options_;
  EventLoop* const loop_;
  const std::shared_ptr<LoopPoster> poster_;
  ConnectionPool pool_;
  // Open addressing: adding and removing a call allocates nothing once the table has grown.
  absl::flat_hash_map<ClientCall*, std::shared_ptr<ClientCall>> calls_;
  // Kept per loop: read buffers; response header lists (each at most max_header_bytes of
  // strings); call timers (about the calls a loop has in flight at its busiest).
  Spares<beast::flat_buffer> spare_buffers_{64};
  Spares<HeaderList> spare_header_lists_{64};
  Spares<std::shared_ptr<CallTimer>> spare_timers_{1024};
  bool stopping_ = false;  // loop thread
  bool stopped_ = false;   // controlling thread
};

}  // namespace switchyard::net::internal
