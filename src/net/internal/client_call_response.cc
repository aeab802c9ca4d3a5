// ClientCall's response side: reading, parsing, delivering the head and the body pieces,
// back-pressure, and handing a finished connection back to the pool.
#include <algorithm>
#include <limits>
#include <utility>

#include "fmt/format.h"

#include "net/internal/client_call.h"
#include "net/internal/client_loop.h"
#include "net/internal/wire.h"

namespace switchyard::net::internal {
namespace {

// Bytes asked of one read. A streamed response's events are far smaller; a large body
// comes in pieces of this size, each handed to OnBody straight from the read buffer.
constexpr size_t kReadBytes = 16 << 10;

}  // namespace

void ClientCall::NewParser() {
  // The fields go into an earlier response's strings: this call's interim response's, or a
  // finished call's.
  HeaderList spare = parser_.has_value() ? parser_->TakeHeaders() : loop_->TakeHeaderList();
  parser_.emplace(std::move(spare));
  parser_->header_limit(static_cast<uint32_t>(
      std::min<size_t>(options_.max_header_bytes, std::numeric_limits<uint32_t>::max())));
  // Not boost::none for "no limit": Boost 1.74 compares a Content-Length against an empty
  // optional as greater, failing every such response.
  parser_->body_limit(body_limit_.value_or(std::numeric_limits<uint64_t>::max()));
  if (head_method_)
    parser_->skip(true);
}

void ClientCall::Read() {
  if (reading_ || stage_ == Stage::kDone)
    return;
  reading_ = true;
  socket_->async_read_some(
      in_.prepare(kReadBytes),
      [self = shared_from_this()](const ErrorCode& ec, size_t bytes) { self->OnRead(ec, bytes); });
}

void ClientCall::OnRead(const ErrorCode& ec, size_t bytes) {
  reading_ = false;
  if (stage_ == Stage::kDone)
    return;
  in_.commit(bytes);
  received_bytes_ += bytes;
  last_read_ = std::chrono::steady_clock::now();
  if (ec) {
    OnReadFailed(ec);
    return;
  }
  Parse();
}

void ClientCall::OnReadFailed(const ErrorCode& ec) {
  if (received_bytes_ == 0) {
    FailBeforeResponse(ec, "read the response");
    return;
  }
  // A body that runs to the close ends here; any other message is cut short.
  if (ec == asio::error::eof && in_.size() == 0 && parser_->got_some()) {
    ErrorCode eof_ec;
    parser_->put_eof(eof_ec);
    if (!eof_ec) {
      Parse();
      return;
    }
  }
  Finish(absl::InternalError(
      fmt::format("{}: connection lost after {} response bytes: {}", Describe(), received_bytes_,
                  ec == asio::error::eof ? "closed before the response ended" : ec.message())));
}

void ClientCall::Parse() {
  while (stage_ != Stage::kDone) {
    // A complete message ends the call even while paused: its connection can go back to
    // the pool instead of waiting on a slow downstream.
    if (parser_->is_done()) {
      OnMessageDone();
      return;
    }
    if (paused_)
      return;
    if (in_.size() == 0) {
      Read();
      return;
    }
    const bool had_head = parser_->is_header_done();
    ErrorCode ec;
    const size_t used = parser_->put(in_.data(), ec);
    if (ec == http::error::need_more) {
      in_.consume(used);
      Read();
      return;
    }
    if (ec) {
      Finish(ParseError(ec));
      return;
    }
    if (!had_head && parser_->is_header_done()) {
      const int status = parser_->status();
      if (status >= 100 && status < 200 && status != 101) {
        // An interim response (100 Continue, 103 Early Hints): the real one follows.
        in_.consume(used);
        NewParser();
        continue;
      }
      OnHead();
      if (stage_ == Stage::kDone)
        return;
    }
    const std::string_view piece = parser_->TakePiece();
    if (!piece.empty()) {
      // The piece points into in_: deliver it before consuming.
      if (handle_->cancel_requested()) {
        Cancel("request cancelled");
        return;
      }
      if (!handler_->OnBody(piece))
        paused_ = true;
    } else if (used == 0 && had_head && !parser_->is_done()) {
      // No progress from what is buffered: wait for more rather than spin.
      Read();
      return;
    }
    in_.consume(used);
  }
}

void ClientCall::OnHead() {
  if (handle_->cancel_requested()) {
    Cancel("request cancelled");
    return;
  }
  stage_ = Stage::kBody;
  // The head came with the read that has just set last_read_ (OnRead, before Parse).
  ArmDeadlineAt(last_read_ + options_.idle_timeout);
  handler_->OnHead(parser_->status(), parser_->headers());
}

void ClientCall::Resume() {
  if (stage_ == Stage::kDone || !paused_)
    return;
  paused_ = false;
  last_read_ = std::chrono::steady_clock::now();
  ArmDeadline(options_.idle_timeout);
  Parse();
}

void ClientCall::OnMessageDone() {
  if (handle_->cancel_requested()) {
    Cancel("request cancelled");
    return;
  }
  // Bytes past the message would be read as the next response's: such a connection, one
  // the server will close, and a switched protocol are not reused.
  const bool reusable = parser_->keep_alive() && in_.size() == 0 && parser_->status() != 101;
  if (reusable) {
    // Idle since the read that ended the message.
    loop_->pool().Release(pool_upstream_, std::move(*socket_), last_read_);
    pool_upstream_ = nullptr;
  }
  Finish(absl::OkStatus());
}

absl::Status ClientCall::ParseError(const ErrorCode& ec) const {
  if (ec == http::error::body_limit) {
    return absl::ResourceExhaustedError(
        fmt::format("{}: response body over {} bytes", Describe(), body_limit_.value_or(0)));
  }
  if (ec == http::error::header_limit) {
    return absl::InternalError(
        fmt::format("{}: response head over {} bytes", Describe(), options_.max_header_bytes));
  }
  return absl::InternalError(fmt::format("{}: malformed response: {}", Describe(), ec.message()));
}

}  // namespace switchyard::net::internal
