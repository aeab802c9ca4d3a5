// HttpResponderImpl: the HttpResponder of one request. Any thread may call it: each call
// joins the responder's own FIFO queue, which one posted task drains on the connection's
// loop, so calls run in call order even when they come from different threads (asio with
// concurrency hint 1 runs a post made from inside a loop handler after posts other threads
// made meanwhile, so posting each call separately could reorder a stream's head and its
// chunks). Each runs against the connection if it still exists. It holds the connection only weakly
// and the loop only through its LoopPoster, so a responder kept after the server stopped is
// harmless: its calls are dropped (OnClose runs its callback at once).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "net/http_server.h"
#include "net/internal/connection.h"
#include "net/internal/event_loop.h"

namespace switchyard::net::internal {

class HttpResponderImpl final : public HttpResponder {
 public:
  HttpResponderImpl(std::shared_ptr<LoopPoster> poster, std::weak_ptr<HttpConnection> connection,
                    std::shared_ptr<ConnectionStatus> status, uint64_t seq);

  void Send(int status, std::string_view content_type, std::string body,
            HeaderList extra_headers) override;
  void StartStream(int status, std::string_view content_type, HeaderList extra_headers) override;
  bool Write(std::string data) override;
  void End() override;
  void OnClose(std::function<void()> callback) override;
  bool closed() const override;
  size_t pending_write_bytes() const override;

 private:
  // Queues run(connection) for the loop, or on_gone() when the connection no longer
  // exists by then. `counted_bytes` are added to pending_write_bytes now; the connection
  // takes them off when run runs, the queue does otherwise.
  void Enqueue(size_t counted_bytes, std::function<void(HttpConnection&)> run,
               std::function<void()> on_gone = nullptr);

  struct OpQueue;
  // Runs the queued ops in order, on the loop.
  static void Drain(const std::shared_ptr<OpQueue>& queue);

  const std::shared_ptr<LoopPoster> poster_;
  const std::shared_ptr<OpQueue> queue_;
  const std::weak_ptr<HttpConnection> connection_;
  const std::shared_ptr<ConnectionStatus> status_;
  const uint64_t seq_;
};

}  // namespace switchyard::net::internal
