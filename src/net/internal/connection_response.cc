// HttpConnection's response side: the responder's operations and the write queue.
#include <algorithm>
#include <span>
#include <utility>

#include "absl/strings/match.h"

#include "base/logging.h"
#include "net/internal/connection.h"

namespace switchyard::net::internal {
namespace {

// Most queued pieces gathered into one write.
constexpr size_t kMaxWriteBuffers = 16;

// The handler's extra headers ask to close the connection after the response.
bool AsksToClose(const HeaderList& headers) {
  return std::any_of(headers.begin(), headers.end(), [](const auto& header) {
    return absl::EqualsIgnoreCase(header.first, "connection") &&
           absl::EqualsIgnoreCase(header.second, "close");
  });
}

}  // namespace

Persistence HttpConnection::PersistenceFor(bool close) const {
  if (close)
    return Persistence::kClose;
  return http11_ ? Persistence::kKeepAliveImplied : Persistence::kKeepAlive;
}

void HttpConnection::Send(uint64_t seq, int status, std::string_view content_type, std::string body,
                          const HeaderList& extra_headers) {
  status_->pending_write_bytes -= body.size();
  if (closed_ || seq != seq_ || response_ != Response::kAwaiting)
    return;
  response_ = Response::kEnded;
  close_after_ = !keep_alive_ || AsksToClose(extra_headers);
  // A 204 has neither a body nor a Content-Length.
  const bool no_content = status == 204;
  ResponseHead head;
  head.status = status;
  head.content_type = content_type;
  head.extra_headers = &extra_headers;
  if (!no_content)
    head.content_length = body.size();
  head.persistence = PersistenceFor(close_after_);
  head.server_name = server_->options.server_name;
  Enqueue(EncodeHead(head));
  if (!head_only_ && !no_content)
    Enqueue(std::move(body));
  Flush();
}

void HttpConnection::StartStream(uint64_t seq, int status, std::string_view content_type,
                                 const HeaderList& extra_headers) {
  if (closed_ || seq != seq_ || response_ != Response::kAwaiting)
    return;
  response_ = Response::kStreaming;
  // HTTP/1.0 has no chunked encoding: the body runs until the close.
  close_after_ = !keep_alive_ || (!http11_ && !head_only_);
  ResponseHead head;
  head.status = status;
  head.content_type = content_type;
  head.extra_headers = &extra_headers;
  head.chunked = http11_;
  head.persistence = PersistenceFor(close_after_);
  head.server_name = server_->options.server_name;
  Enqueue(EncodeHead(head));
  Flush();
}

void HttpConnection::Write(uint64_t seq, std::string data) {
  status_->pending_write_bytes -= data.size();
  // An empty chunk would end the stream.
  if (closed_ || seq != seq_ || response_ != Response::kStreaming || head_only_ || data.empty())
    return;
  if (http11_) {
    Enqueue(ChunkPrefix(data.size()));
    Enqueue(std::move(data));
    Enqueue(std::string(kChunkEnd));
  } else {
    Enqueue(std::move(data));
  }
  if (status_->pending_write_bytes > server_->options.max_pending_write_bytes) {
    SY_LOG_DEBUG("http: closing {}: {} bytes unsent", remote_address_,
                 status_->pending_write_bytes.load());
    // Closed by a handler of its own, not inside this call: a writer on the loop may hold a
    // lock that the close callback takes. Its responder reports closed from now on, so that
    // nothing more is queued for it.
    status_->closed = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Close(); });
    return;
  }
  Flush();
}

void HttpConnection::End(uint64_t seq) {
  if (closed_ || seq != seq_ || response_ != Response::kStreaming)
    return;
  response_ = Response::kEnded;
  if (http11_ && !head_only_)
    Enqueue(std::string(kLastChunk));
  Flush();
}

void HttpConnection::SetCloseCallback(uint64_t seq, std::function<void()> callback) {
  if (closed_) {
    if (callback)
      callback();
  } else if (seq == seq_ && responder_ != nullptr) {
    close_callback_ = std::move(callback);
  }
}

void HttpConnection::SetDrainCallback(uint64_t seq, size_t low_water,
                                      std::function<void()> callback) {
  if (closed_ || seq != seq_ || responder_ == nullptr)
    return;
  drain_callback_ = std::move(callback);
  drain_low_water_ = low_water;
  MaybeRunDrainCallback();
}

void HttpConnection::MaybeRunDrainCallback() {
  if (drain_callback_ == nullptr || status_->pending_write_bytes > drain_low_water_)
    return;
  const std::function<void()> callback = std::move(drain_callback_);
  drain_callback_ = nullptr;
  callback();
}

void HttpConnection::Enqueue(std::string bytes) {
  status_->pending_write_bytes += bytes.size();
  out_.push_back(std::move(bytes));
}

void HttpConnection::Flush() {
  if (writing_ || closed_)
    return;
  if (out_.empty()) {
    OnWritesDone();
    return;
  }
  write_buffers_.clear();
  for (size_t i = 0; i < out_.size() && i < kMaxWriteBuffers; ++i) {
    const size_t skip = i == 0 ? out_offset_ : 0;
    write_buffers_.emplace_back(out_[i].data() + skip, out_[i].size() - skip);
  }
  writing_ = true;
  // A client that stops reading makes no progress at all; one that reads slowly does.
  write_deadline_.Arm(server_->options.write_timeout, shared_from_this());
  // The operation keeps a view of write_buffers_, which stays as it is until OnWrite: asio
  // would copy a vector (an allocation per write).
  socket_.async_write_some(
      std::span<const asio::const_buffer>(write_buffers_),
      [self = shared_from_this()](const ErrorCode& ec, size_t bytes) { self->OnWrite(ec, bytes); });
}

void HttpConnection::OnWrite(const ErrorCode& ec, size_t bytes) {
  writing_ = false;
  write_deadline_.Disarm();
  if (closed_)
    return;
  if (ec) {
    SY_LOG_DEBUG("http: write to {} failed: {}", remote_address_, ec.message());
    Close();
    return;
  }
  status_->pending_write_bytes -= bytes;
  while (bytes > 0) {
    const size_t left = out_.front().size() - out_offset_;
    if (bytes < left) {
      out_offset_ += bytes;
      break;
    }
    bytes -= left;
    out_.pop_front();
    out_offset_ = 0;
  }
  MaybeRunDrainCallback();
  Flush();
}

void HttpConnection::OnWritesDone() {
  if (phase_ == Phase::kDraining) {
    StartDraining();
  } else if (phase_ == Phase::kHandling && response_ == Response::kEnded) {
    FinishResponse();
  }
}

}  // namespace switchyard::net::internal
