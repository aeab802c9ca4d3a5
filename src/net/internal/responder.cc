#include "net/internal/responder.h"

#include <utility>

namespace switchyard::net::internal {

HttpResponderImpl::HttpResponderImpl(std::shared_ptr<LoopPoster> poster,
                                     std::weak_ptr<HttpConnection> connection,
                                     std::shared_ptr<ConnectionStatus> status, uint64_t seq)
    : poster_(std::move(poster)),
      connection_(std::move(connection)),
      status_(std::move(status)),
      seq_(seq) {}

template <typename Op>
void HttpResponderImpl::PostToConnection(size_t counted_bytes, Op op) {
  status_->pending_write_bytes += counted_bytes;
  const bool posted = poster_->Post(
      [connection = connection_, status = status_, counted_bytes, op = std::move(op)]() mutable {
        if (std::shared_ptr<HttpConnection> locked = connection.lock()) {
          op(*locked);
        } else {
          status->pending_write_bytes -= counted_bytes;
        }
      });
  if (!posted)
    status_->pending_write_bytes -= counted_bytes;
}

void HttpResponderImpl::Send(int status, std::string_view content_type, std::string body,
                             HeaderList extra_headers) {
  if (closed())
    return;
  const size_t size = body.size();
  PostToConnection(
      size, [seq = seq_, status, content_type = std::string(content_type), body = std::move(body),
             extra_headers = std::move(extra_headers)](HttpConnection& connection) mutable {
        connection.Send(seq, status, content_type, std::move(body), extra_headers);
      });
}

void HttpResponderImpl::StartStream(int status, std::string_view content_type,
                                    HeaderList extra_headers) {
  if (closed())
    return;
  PostToConnection(0, [seq = seq_, status, content_type = std::string(content_type),
                       extra_headers = std::move(extra_headers)](HttpConnection& connection) {
    connection.StartStream(seq, status, content_type, extra_headers);
  });
}

bool HttpResponderImpl::Write(std::string data) {
  if (closed())
    return false;
  const size_t size = data.size();
  PostToConnection(size, [seq = seq_, data = std::move(data)](HttpConnection& connection) mutable {
    connection.Write(seq, std::move(data));
  });
  return !closed();
}

void HttpResponderImpl::End() {
  if (closed())
    return;
  PostToConnection(0, [seq = seq_](HttpConnection& connection) { connection.End(seq); });
}

void HttpResponderImpl::OnClose(std::function<void()> callback) {
  // Shared so that the callback is still here to run when the post is refused.
  auto shared = std::make_shared<std::function<void()>>(std::move(callback));
  const bool posted = !closed() && poster_->Post([connection = connection_, seq = seq_, shared] {
    if (std::shared_ptr<HttpConnection> locked = connection.lock()) {
      locked->SetCloseCallback(seq, std::move(*shared));
    } else if (*shared) {
      (*shared)();  // gone, so closed
    }
  });
  if (!posted && *shared)
    (*shared)();
}

bool HttpResponderImpl::closed() const {
  return status_->closed;
}

size_t HttpResponderImpl::pending_write_bytes() const {
  return status_->pending_write_bytes;
}

}  // namespace switchyard::net::internal
