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
  }
}

void HttpResponderImpl::Drain() {
  for (;;) {
    Op op;
    {
      base::MutexLock lock(&mu_);
      if (next_op_ == ops_.size()) {
        ops_.clear();
        next_op_ = 0;
        draining_ = false;
        return;
      }
      op = std::move(ops_[next_op_++]);
    }
    Run(op);
  }
}

void HttpResponderImpl::Enqueue(Op op) {
  status_->pending_write_bytes += op.data.size();
  const bool on_loop = EventLoop::Current() == loop_;
  bool run_now = false;
  bool schedule = false;
  {
    base::MutexLock lock(&mu_);
    if (on_loop && !draining_) {
      run_now = true;
    } else {
      ops_.push_back(std::move(op));
      schedule = !draining_;
    }
    draining_ = true;
  }
  if (run_now) {
    Run(op);
    Drain();  // what other threads queued meanwhile
    return;
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
    draining_ = false;
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
  Op op;
  op.kind = Op::Kind::kWrite;
  op.data = std::move(data);
  Enqueue(std::move(op));
  return !closed();
}

void HttpResponderImpl::End() {
  if (closed())
    return;
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
  Op op;
  op.kind = Op::Kind::kOnClose;
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
