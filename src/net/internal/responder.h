// HttpResponderImpl: the HttpResponder of one request. Any thread may call it: each call
// is posted to the connection's loop, in call order, and runs there against the
// connection if it still exists. It holds the connection only weakly and the loop only
// through its LoopPoster, so a responder kept after the server stopped is harmless: its
// calls are dropped (OnClose runs its callback at once).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

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
  // Runs op(connection) on the loop. `counted_bytes` are added to pending_write_bytes now;
  // the connection takes them off when op runs, this does when op cannot run.
  template <typename Op>
  void PostToConnection(size_t counted_bytes, Op op);

  const std::shared_ptr<LoopPoster> poster_;
  const std::weak_ptr<HttpConnection> connection_;
  const std::shared_ptr<ConnectionStatus> status_;
  const uint64_t seq_;
};

}  // namespace switchyard::net::internal
