#include "net/internal/responder.h"

#include <utility>

namespace switchyard::net::internal {

struct HttpResponderImpl::OpQueue {
  struct Op {
    size_t counted_bytes = 0;
    std::function<void(HttpConnection&)> run;
    // Runs instead of `run` when the connection is gone.
    std::function<void()> on_gone;
  };
  std::weak_ptr<HttpConnection> connection;
  std::shared_ptr<ConnectionStatus> status;
  base::Mutex mu;
  std::deque<Op> ops ABSL_GUARDED_BY(mu);
  bool draining ABSL_GUARDED_BY(mu) = false;
};

HttpResponderImpl::HttpResponderImpl(std::shared_ptr<LoopPoster> poster,
                                     std::weak_ptr<HttpConnection> connection,
                                     std::shared_ptr<ConnectionStatus> status, uint64_t seq)
    : poster_(std::move(poster)),
      queue_(std::make_shared<OpQueue>()),
      connection_(std::move(connection)),
      status_(std::move(status)),
      seq_(seq) {
  queue_->connection = connection_;
  queue_->status = status_;
}

void HttpResponderImpl::Drain(const std::shared_ptr<OpQueue>& queue) {
  for (;;) {
    OpQueue::Op op;
    {
      base::MutexLock lock(&queue->mu);
      if (queue->ops.empty()) {
        queue->draining = false;
        return;
      }
      op = std::move(queue->ops.front());
      queue->ops.pop_front();
    }
    if (std::shared_ptr<HttpConnection> locked = queue->connection.lock()) {
      op.run(*locked);
    } else {
      queue->status->pending_write_bytes -= op.counted_bytes;
      if (op.on_gone)
        op.on_gone();
    }
  }
}

void HttpResponderImpl::Enqueue(size_t counted_bytes, std::function<void(HttpConnection&)> run,
                                std::function<void()> on_gone) {
  status_->pending_write_bytes += counted_bytes;
  bool schedule = false;
  {
    base::MutexLock lock(&queue_->mu);
    queue_->ops.push_back({counted_bytes, std::move(run), std::move(on_gone)});
    schedule = !queue_->draining;
    queue_->draining = true;
  }
  if (!schedule || poster_->Post([queue = queue_] { Drain(queue); }))
    return;
  // The loop is gone, so is the connection: settle every queued op as undeliverable.
  std::deque<OpQueue::Op> dropped;
  {
    base::MutexLock lock(&queue_->mu);
    dropped.swap(queue_->ops);
    queue_->draining = false;
  }
  for (const OpQueue::Op& d : dropped) {
    status_->pending_write_bytes -= d.counted_bytes;
    if (d.on_gone)
      d.on_gone();
  }
}

void HttpResponderImpl::Send(int status, std::string_view content_type, std::string body,
                             HeaderList extra_headers) {
  if (closed())
    return;
  const size_t size = body.size();
  Enqueue(size,
          [seq = seq_, status, content_type = std::string(content_type), body = std::move(body),
           extra_headers = std::move(extra_headers)](HttpConnection& connection) mutable {
            connection.Send(seq, status, content_type, std::move(body), extra_headers);
          });
}

void HttpResponderImpl::StartStream(int status, std::string_view content_type,
                                    HeaderList extra_headers) {
  if (closed())
    return;
  Enqueue(0, [seq = seq_, status, content_type = std::string(content_type),
              extra_headers = std::move(extra_headers)](HttpConnection& connection) {
    connection.StartStream(seq, status, content_type, extra_headers);
  });
}

bool HttpResponderImpl::Write(std::string data) {
  if (closed())
    return false;
  const size_t size = data.size();
  Enqueue(size, [seq = seq_, data = std::move(data)](HttpConnection& connection) mutable {
    connection.Write(seq, std::move(data));
  });
  return !closed();
}

void HttpResponderImpl::End() {
  if (closed())
    return;
  Enqueue(0, [seq = seq_](HttpConnection& connection) { connection.End(seq); });
}

void HttpResponderImpl::OnClose(std::function<void()> callback) {
  // Shared so that the callback is still here to run when it cannot be delivered.
  auto shared = std::make_shared<std::function<void()>>(std::move(callback));
  auto run_now = [shared] {
    if (*shared)
      (*shared)();
  };
  if (closed()) {
    run_now();
    return;
  }
  Enqueue(
      0,
      [seq = seq_, shared](HttpConnection& connection) {
        connection.SetCloseCallback(seq, std::move(*shared));
      },
      run_now);
}

bool HttpResponderImpl::closed() const {
  return status_->closed;
}

size_t HttpResponderImpl::pending_write_bytes() const {
  return status_->pending_write_bytes;
}

}  // namespace switchyard::net::internal
