#include "net/internal/connection.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/recycling_allocator.h"
#include "net/internal/responder.h"

namespace switchyard::net::internal {
namespace {

// How long a connection that is being closed after its last response keeps reading (and
// discarding) what the client still sends, so that the close does not reset the
// connection before the client has read that response.
constexpr std::chrono::milliseconds kDrainTimeout{1'000};

// Read sizes. A request head (and a small body) fits in a head-sized read; a body is read in
// larger pieces. While the handler has a request, reads only notice a disconnect or keep a
// pipelined request, into a chunk of their own.
constexpr size_t kHeadReadBytes = 4 << 10;
constexpr size_t kBodyReadBytes = 16 << 10;
constexpr size_t kChunkBytes = 4 << 10;

std::string FormatEndpoint(const tcp::endpoint& endpoint) {
  const asio::ip::address address = endpoint.address();
  return address.is_v6() ? fmt::format("[{}]:{}", address.to_string(), endpoint.port())
                         : fmt::format("{}:{}", address.to_string(), endpoint.port());
}

}  // namespace

void ConnectionRegistry::Add(std::shared_ptr<HttpConnection> connection) {
  HttpConnection* key = connection.get();
  connections_.emplace(key, std::move(connection));
}

void ConnectionRegistry::Remove(HttpConnection* connection) {
  connections_.erase(connection);
}

bool ConnectionRegistry::ShedLongestWaiting(const HttpConnection* except) {
  HttpConnection* longest = nullptr;
  std::chrono::steady_clock::time_point longest_since;
  for (const auto& [key, connection] : connections_) {
    if (key == except)
      continue;
    const std::optional<std::chrono::steady_clock::time_point> since = connection->WaitingSince();
    if (since.has_value() && (longest == nullptr || *since < longest_since)) {
      longest = key;
      longest_since = *since;
    }
  }
  if (longest == nullptr)
    return false;
  SY_LOG_DEBUG("http: shedding a waiting connection to make room for a new one");
  longest->Close();
  return true;
}

void ConnectionRegistry::CloseAll() {
  // Close removes from the map, so walk a copy.
  std::vector<std::shared_ptr<HttpConnection>> connections;
  connections.reserve(connections_.size());
  for (const auto& [key, connection] : connections_)
    connections.push_back(connection);
  for (const auto& connection : connections)
    connection->Close();
}

HttpConnection::HttpConnection(Socket socket, ConnectionSlot slot, ServerContext* server,
                               ConnectionRegistry* registry, EventLoop* loop)
    : server_(server),
      registry_(registry),
      loop_(loop),
      status_(std::make_shared<ConnectionStatus>()),
      socket_(std::move(socket)),
      slot_(std::move(slot)),
      waiting_since_(std::chrono::steady_clock::now()),
      read_deadline_(socket_.get_executor(), [this] { OnReadTimeout(); }),
      write_deadline_(socket_.get_executor(), [this] {
        SY_LOG_DEBUG("http: closing {}: write timed out", remote_address_);
        Close();
      }) {}

void HttpConnection::Start() {
  ErrorCode ec;
  const tcp::endpoint remote = socket_.remote_endpoint(ec);
  if (!ec)
    remote_address_ = FormatEndpoint(remote);
  // Small writes (SSE events) go out at once instead of waiting for an ACK.
  socket_.set_option(tcp::no_delay(true), ec);
  StartWaiting(Phase::kHeader);
  NewParser();
  ArmReadTimer(server_->options.header_timeout);
  header_timer_armed_ = true;
  Read();
}

void HttpConnection::Close() {
  if (closed_)
    return;
  // The registry may hold the last reference.
  const std::shared_ptr<HttpConnection> self = shared_from_this();
  closed_ = true;
  status_->closed = true;
  read_deadline_.Cancel();
  write_deadline_.Cancel();
  ErrorCode ec;
  socket_.close(ec);
  size_t unsent = 0;
  for (const std::string& bytes : out_)
    unsent += bytes.size();
  status_->pending_write_bytes -= unsent - out_offset_;
  out_.clear();
  out_offset_ = 0;
  parser_.reset();
  registry_->Remove(this);
  slot_.Release();
  // Set only while a response is not fully written: tell whoever makes it.
  std::function<void()> callback = std::move(close_callback_);
  close_callback_ = nullptr;
  drain_callback_ = nullptr;
  responder_.reset();
  if (callback)
    callback();
}

void HttpConnection::NewParser() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(
      std::min<size_t>(server_->options.max_header_bytes, std::numeric_limits<uint32_t>::max())));
  parser_->body_limit(server_->options.max_body_bytes);
}

void HttpConnection::Read() {
  if (reading_ || closed_)
    return;
  reading_ = true;
  // Nothing but OnRead touches in_ until a read started now ends, except a timeout's
  // Reject, which clears it (its memory stays) and drains: the bytes are then not taken.
  read_into_in_ = phase_ == Phase::kIdle || phase_ == Phase::kHeader || phase_ == Phase::kBody;
  auto on_read = [self = shared_from_this()](const ErrorCode& ec, size_t bytes) {
    self->OnRead(ec, bytes);
  };
  if (read_into_in_) {
    const size_t bytes = phase_ == Phase::kBody ? kBodyReadBytes : kHeadReadBytes;
    socket_.async_read_some(in_.prepare(bytes), std::move(on_read));
  } else {
    if (read_chunk_ == nullptr)
      read_chunk_ = std::make_unique<char[]>(kChunkBytes);
    socket_.async_read_some(asio::buffer(read_chunk_.get(), kChunkBytes), std::move(on_read));
  }
}

void HttpConnection::OnRead(const ErrorCode& ec, size_t bytes) {
  reading_ = false;
  if (closed_)
    return;
  if (ec) {
    // End of stream, reset or any other failure: the client is gone (or, when draining,
    // has read everything and closed its side).
    SY_LOG_DEBUG("http: connection {} closed by peer: {}", remote_address_, ec.message());
    Close();
    return;
  }
  const auto append = [&] {
    if (!read_into_in_) {
      const auto space = in_.prepare(bytes);
      std::memcpy(space.data(), read_chunk_.get(), bytes);
    }
    in_.commit(bytes);
  };
  switch (phase_) {
    case Phase::kDraining:
      Read();
      return;
    case Phase::kHandling:
      // A pipelined request: kept for after the response, up to one header's worth; then
      // reading stops until the response is done.
      append();
      if (in_.size() < server_->options.max_header_bytes)
        Read();
      return;
    case Phase::kIdle:
      phase_ = Phase::kHeader;
      header_timer_armed_ = false;
      break;
    case Phase::kBody:
    case Phase::kHeader:
      break;
  }
  append();
  Parse();
}

void HttpConnection::Parse() {
  while (true) {
    if (in_.size() == 0) {
      ReadMore();
      return;
    }
    ErrorCode ec;
    in_.consume(parser_->put(in_.data(), ec));
    if (ec == http::error::need_more) {
      ReadMore();
      return;
    }
    if (ec == http::error::header_limit) {
      Reject(431, "request line and headers are too large");
      return;
    }
    if (ec == http::error::body_limit) {
      Reject(413, "request body is too large");
      return;
    }
    if (ec) {
      Reject(400, fmt::format("malformed request: {}", ec.message()));
      return;
    }
    if (phase_ == Phase::kHeader && parser_->is_header_done()) {
      phase_ = Phase::kBody;
      MaybeSendContinue();
    }
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
  }
}

void HttpConnection::ReadMore() {
  // A request that came whole in one read arms neither timeout.
  if (phase_ == Phase::kHeader && !header_timer_armed_) {
    ArmReadTimer(server_->options.header_timeout);
    header_timer_armed_ = true;
  } else if (phase_ == Phase::kBody) {
    ArmReadTimer(server_->options.body_idle_timeout);
  }
  Read();
}

void HttpConnection::MaybeSendContinue() {
  if (parser_->is_done() || parser_->version() < 11 || !parser_->expects_continue())
    return;
  Enqueue(std::string(kContinue));
  Flush();
}

void HttpConnection::Dispatch() {
  read_deadline_.Disarm();
  phase_ = Phase::kHandling;
  keep_alive_ = parser_->keep_alive();
  http11_ = parser_->version() >= 11;
  head_only_ = parser_->head_method();
  HttpRequest request = parser_->TakeRequest();
  request.remote_address = remote_address_;
  parser_.reset();
  ++seq_;
  response_ = Response::kAwaiting;
  close_callback_ = nullptr;
  auto responder = std::allocate_shared<HttpResponderImpl>(
      base::RecyclingAllocator<HttpResponderImpl>(), loop_, weak_from_this(), status_, seq_);
  responder_ = responder;
  // Keep a read outstanding so that a client going away is noticed while the handler works.
  if (in_.size() < server_->options.max_header_bytes)
    Read();
  server_->handler(std::move(request), std::move(responder));
}

void HttpConnection::Reject(int status, std::string_view message) {
  SY_LOG_DEBUG("http: {} from {}: {}", status, remote_address_, message);
  read_deadline_.Disarm();
  StartWaiting(Phase::kDraining);
  parser_.reset();
  in_.clear();
  auto [content_type, body] = server_->options.error_body(status, message);
  ResponseHead head;
  head.status = status;
  head.content_type = content_type;
  head.content_length = body.size();
  head.persistence = Persistence::kClose;
  head.server_name = server_->options.server_name;
  Enqueue(EncodeHead(head));
  Enqueue(std::move(body));
  Flush();
  Read();
}

void HttpConnection::FinishResponse() {
  responder_.reset();
  close_callback_ = nullptr;
  drain_callback_ = nullptr;
  response_ = Response::kNone;
  if (close_after_) {
    StartWaiting(Phase::kDraining);
    StartDraining();
    return;
  }
  NewParser();
  if (in_.size() > 0) {
    StartWaiting(Phase::kHeader);
    header_timer_armed_ = false;
    Parse();
  } else {
    StartWaiting(Phase::kIdle);
    // An idle connection keeps no more than a head-sized buffer (a large body grew it).
    if (in_.capacity() > kHeadReadBytes)
      in_.shrink_to_fit();
    ArmReadTimer(server_->options.keep_alive_timeout);
    Read();
  }
}

void HttpConnection::StartWaiting(Phase phase) {
  phase_ = phase;
  waiting_since_ = std::chrono::steady_clock::now();
}

std::optional<std::chrono::steady_clock::time_point> HttpConnection::WaitingSince() const {
  if (closed_)
    return std::nullopt;
  switch (phase_) {
    case Phase::kIdle:
    case Phase::kHeader:
    case Phase::kDraining:
      return waiting_since_;
    case Phase::kBody:
    case Phase::kHandling:
      return std::nullopt;
  }
  return std::nullopt;
}

void HttpConnection::StartDraining() {
  // Our side is done: the client reads to the end, then closes its side (or the drain
  // timeout closes ours).
  ErrorCode ec;
  socket_.shutdown(Socket::shutdown_send, ec);
  in_.clear();
  ArmReadTimer(kDrainTimeout);
  Read();
}

void HttpConnection::ArmReadTimer(std::chrono::milliseconds timeout) {
  read_deadline_.Arm(timeout, shared_from_this());
}

void HttpConnection::OnReadTimeout() {
  switch (phase_) {
    case Phase::kHeader:
      Reject(408, "request headers not received in time");
      return;
    case Phase::kBody:
      Reject(408, "request body stalled");
      return;
    case Phase::kIdle:
    case Phase::kDraining:
      Close();
      return;
    case Phase::kHandling:
      return;
  }
}

}  // namespace switchyard::net::internal
