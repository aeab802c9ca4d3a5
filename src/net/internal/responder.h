// HttpResponderImpl: the HttpResponder of one request. Any thread may call it: each call
// joins the responder's own FIFO queue, which one posted task drains on the connection's
// loop, so calls run in call order even when they come from different threads (asio with
// concurrency hint 1 runs a post made from inside a loop handler after posts other threads
// made meanwhile, so posting each call separately could reorder a stream's head and its
// chunks). A call made on the connection's own loop while nothing is queued runs at once
// instead, straight against the connection, without a queue record or the queue's lock (a
// proxy answers from the loop that holds the connection: no post, no second handler). Each
// runs against the connection if it still exists. It holds the connection
// only weakly and the loop only through its LoopPoster, so a responder kept after the server
// stopped is harmless: its calls are dropped (OnClose runs its callback at once).
//
// The queue holds plain operation records, not closures: a response costs no allocation
// here beyond the responder itself (a proxy makes one per request).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "net/http_server.h"
#include "net/internal/connection.h"
#include "net/internal/event_loop.h"

namespace switchyard::net::internal {

class HttpResponderImpl final : public HttpResponder,
                                public std::enable_shared_from_this<HttpResponderImpl> {
 public:
  // `loop` is the connection's; it is only compared with the calling thread's loop, never
  // used, so the responder may outlive it.
  HttpResponderImpl(EventLoop* loop, std::weak_ptr<HttpConnection> connection,
                    std::shared_ptr<ConnectionStatus> status, uint64_t seq);

  void Send(int status, std::string_view content_type, std::string body,
            HeaderList extra_headers) override;
  void StartStream(int status, std::string_view content_type, HeaderList extra_headers) override;
  bool Write(std::string data) override;
  void End() override;
  void OnClose(std::function<void()> callback) override;
  bool closed() const override;
  size_t pending_write_bytes() const override;
  void OnDrained(size_t low_water, std::function<void()> callback) override;

 private:
  struct Op {
    enum class Kind { kSend, kStartStream, kWrite, kEnd, kOnClose, kOnDrained };
    Kind kind = Kind::kEnd;
    int status = 0;
    size_t low_water = 0;  // OnDrained's
    std::string content_type;
    std::string data;  // Send's body, Write's chunk
    HeaderList headers;
    std::function<void()> callback;  // OnClose's, OnDrained's
  };

  // The connection, when a call may run against it at once: on its loop, with nothing
  // queued and no call of this responder running; else nullptr (the call is queued).
  std::shared_ptr<HttpConnection> ConnectionToRunNow() const;
  // Marks a call running at once for its scope, so that a call it makes in turn is queued
  // behind it.
  class RunningNow;
  // Queues `op` for the loop. The caller added its data bytes to pending_write_bytes; the
  // connection takes them off when the op runs, the queue does otherwise.
  void Enqueue(Op op);
  // Runs the queued ops in order, on the loop.
  void Drain();
  // Runs `op` against the connection, or settles it when the connection is gone.
  void Run(Op& op);

  const EventLoop* const loop_;
  const std::shared_ptr<LoopPoster> poster_;
  const std::weak_ptr<HttpConnection> connection_;
  const std::shared_ptr<ConnectionStatus> status_;
  const uint64_t seq_;

  base::Mutex mu_;
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
  size_t next_op_ ABSL_GUARDED_BY(mu_) = 0;  // ops_[next_op_..] are still to run
  // An op is queued or a drain is posted: later ops queue behind it. Written under mu_; read
  // without it by the loop, which runs a call at once only while it is unset.
  std::atomic<bool> draining_{false};
  bool running_now_ = false;  // loop thread only
};

}  // namespace switchyard::net::internal
