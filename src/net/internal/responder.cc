#include "net/internal/responder.h"

#include <utility>

namespace switchyard::net::internal {

HttpResponderImpl::HttpResponderImpl(EventLoop* loop, std::weak_ptr<HttpConnection> connection,
                                     std::shared_ptr<ConnectionStatus> status, uint64_t seq)
    : loop_(loop),
      poster_(loop->poster()),
      connection_(std::move(connection)),
      status_(std::move(status)),
      seq_(seq) {}

void HttpResponderImpl::Run(Op& op) {
  const std::shared_ptr<HttpConnection> connection = connection_.lock();
  if (connection == nullptr) {
    status_->pending_write_bytes -= op.data.size();
    if (op.kind == Op::Kind::kOnClose && op.callback)
      op.callback();
    return;
  }
  switch (op.kind) {
    case Op::Kind::kSend:
      connection->Send(seq_, op.status, op.content_type, std::move(op.data), op.headers);
      return;
    case Op::Kind::kStartStream:
      connection->StartStream(seq_, op.status, op.content_type, op.headers);
      return;
    case Op::Kind::kWrite:
      connection->Write(seq_, std::move(op.data));
      return;
    case Op::Kind::kEnd:
      connection->End(seq_);
      return;
    case Op::Kind::kOnClose:
      connection->SetCloseCallback(seq_, std::move(op.callback));
      return;
    case Op::Kind::kOnDrained:
      connection->SetDrainCallback(seq_, op.low_water, std::move(op.callback));
      return;
  }
}

class HttpResponderImpl::RunningNow {
 public:
  explicit RunningNow(HttpResponderImpl* responder) : responder_(responder) {
    responder_->running_now_ = true;
  }
  ~RunningNow() { responder_->running_now_ = false; }
  RunningNow(const RunningNow&) = delete;
  RunningNow& operator=(const RunningNow&) = delete;

 private:
  HttpResponderImpl* const responder_;
};

std::shared_ptr<HttpConnection> HttpResponderImpl::ConnectionToRunNow() const {
  if (EventLoop::Current() != loop_ || running_now_ || draining_.load(std::memory_order_acquire))
    return nullptr;
  return connection_.lock();
}

void HttpResponderImpl::Drain() {
  for (;;) {
    Op op;
    {
      base::MutexLock lock(&mu_);
      if (next_op_ == ops_.size()) {
        ops_.clear();
        next_op_ = 0;
        draining_.store(false, std::memory_order_release);
        return;
      }
      op = std::move(ops_[next_op_++]);
    }
    Run(op);
  }
}

void HttpResponderImpl::Enqueue(Op op) {
  bool schedule = false;
  {
    base::MutexLock lock(&mu_);
    ops_.push_back(std::move(op));
    schedule = !draining_.load(std::memory_order_relaxed);
    draining_.store(true, std::memory_order_release);
  }
  if (!schedule || poster_->Post([self = shared_from_this()] { self->Drain(); }))
    return;
  // The loop is gone, so is the connection: settle every queued op as undeliverable.
  std::vector<Op> dropped;
  {
    base::MutexLock lock(&mu_);
    dropped.assign(std::make_move_iterator(ops_.begin() + static_cast<ptrdiff_t>(next_op_)),
                   std::make_move_iterator(ops_.end()));
    ops_.clear();
    next_op_ = 0;
    draining_.store(false, std::memory_order_release);
  }
  for (Op& d : dropped) {
    status_->pending_write_bytes -= d.data.size();
    if (d.kind == Op::Kind::kOnClose && d.callback)
      d.callback();
  }
}

void HttpResponderImpl::Send(int status, std::string_view content_type, std::string body,
                             HeaderList extra_headers) {
  if (closed())
    return;
  status_->pending_write_bytes += body.size();
  if (const std::shared_ptr<HttpConnection> connection = ConnectionToRunNow()) {
    const RunningNow running(this);
    connection->Send(seq_, status, content_type, std::move(body), extra_headers);
    return;
  }
  Op op;
  op.kind = Op::Kind::kSend;
  op.status = status;
  op.content_type = std::string(content_type);
  op.data = std::move(body);
  op.headers = std::move(extra_headers);
  Enqueue(std::move(op));
}

void HttpResponderImpl::StartStream(int status, std::string_view content_type,
                                    HeaderList extra_headers) {
  if (closed())
    return;
  if (const std::shared_ptr<HttpConnection> connection = ConnectionToRunNow()) {
    const RunningNow running(this);
    connection->StartStream(seq_, status, content_type, extra_headers);
    return;
  }
  Op op;
  op.kind = Op::Kind::kStartStream;
  op.status = status;
  op.content_type = std::string(content_type);
  op.headers = std::move(extra_headers);
  Enqueue(std::move(op));
}

bool HttpResponderImpl::Write(std::string data) {
  if (closed())
    return false;
  status_->pending_write_bytes += data.size();
  if (const std::shared_ptr<HttpConnection> connection = ConnectionToRunNow()) {
    const RunningNow running(this);
    connection->Write(seq_, std::move(data));
    return !closed();
  }
  Op op;
  op.kind = Op::Kind::kWrite;
  op.data = std::move(data);
  Enqueue(std::move(op));
  return !closed();
}

void HttpResponderImpl::End() {
  if (closed())
    return;
  if (const std::shared_ptr<HttpConnection> connection = ConnectionToRunNow()) {
    const RunningNow running(this);
    connection->End(seq_);
    return;
  }
  Op op;
  op.kind = Op::Kind::kEnd;
  Enqueue(std::move(op));
}

void HttpResponderImpl::OnClose(std::function<void()> callback) {
  if (closed()) {
    if (callback)
      callback();
    return;
  }
  if (const std::shared_ptr<HttpConnection> connection = ConnectionToRunNow()) {
    const RunningNow running(this);
    connection->SetCloseCallback(seq_, std::move(callback));
    return;
  }
  Op op;
  op.kind = Op::Kind::kOnClose;
  op.callback = std::move(callback);
  Enqueue(std::move(op));
}

void HttpResponderImpl::OnDrained(size_t low_water, std::function<void()> callback) {
  if (closed())
    return;
  if (const std::shared_ptr<HttpConnection> connection = ConnectionToRunNow()) {
    const RunningNow running(this);
    connection->SetDrainCallback(seq_, low_water, std::move(callback));
    return;
  }
  Op op;
  op.kind = Op::Kind::kOnDrained;
  op.low_water = low_water;
  op.callback = std::move(callback);
  Enqueue(std::move(op));
}

bool HttpResponderImpl::closed() const {
  return status_->closed;
}

size_t HttpResponderImpl::pending_write_bytes() const {
  return status_->pending_write_bytes;
}

}  // namespace switchyard::net::internal
