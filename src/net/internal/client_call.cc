#include "net/internal/client_call.h"

#include <array>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "net/host_port.h"
#include "net/internal/client_loop.h"
#include "net/internal/wire.h"

namespace switchyard::net::internal {
namespace {

// Methods whose requests carry a body, so that an empty one is still framed.
bool SendsBody(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

}  // namespace

void ClientCallHandle::Cancel() {
  if (cancel_requested_.exchange(true, std::memory_order_acq_rel))
    return;
  poster_->Post([call = call_] {
    if (const std::shared_ptr<ClientCall> locked = call.lock())
      locked->Cancel("request cancelled");
  });
}

void ClientCallHandle::Resume() {
  poster_->Post([call = call_] {
    if (const std::shared_ptr<ClientCall> locked = call.lock())
      locked->Resume();
  });
}

ClientCall::ClientCall(ClientLoop* loop, const HttpClientRequest& request,
                       std::shared_ptr<HttpResponseHandler> handler,
                       std::shared_ptr<const ClientCallHandle> handle,
                       std::optional<size_t> body_limit)
    : loop_(loop),
      options_(loop->options()),
      first_byte_timeout_(request.first_byte_timeout.value_or(options_.first_byte_timeout)),
      upstream_(request.upstream),
      body_(request.body),
      head_method_(request.method == "HEAD"),
      handler_(std::move(handler)),
      handle_(std::move(handle)),
      body_limit_(body_limit) {
  RequestHead head;
  head.method = request.method;
  head.target = request.target;
  head.host = request.upstream;
  head.headers = &request.headers;
  if (!request.body.empty() || SendsBody(request.method))
    head.content_length = request.body.size();
  absl::StatusOr<std::string> bytes = EncodeRequestHead(head);
  if (bytes.ok()) {
    head_bytes_ = *std::move(bytes);
  } else {
    bad_request_ = bytes.status();
  }
}

void ClientCall::Start() {
  absl::Status status = Prepare();
  if (status.ok())
    status = Begin();
  if (!status.ok())
    Finish(status);
}

void ClientCall::StartInSend() {
  absl::Status status = Prepare();
  if (status.ok())
    status = Begin();
  if (!status.ok()) {
    asio::post(loop_->context(),
               [self = shared_from_this(), status = std::move(status)] { self->Finish(status); });
  }
}

absl::Status ClientCall::Begin() {
  loop_->Add(shared_from_this());
  registered_ = true;
  in_ = loop_->TakeReadBuffer();
  timer_ = loop_->TakeTimer();
  // The loop holds the call until Finish, which unsets this.
  timer_->on_expiry = [this] { OnDeadline(); };
  pool_upstream_ = loop_->pool().Hold(upstream_);
  const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  if (loop_->pool().Acquire(pool_upstream_, now, &socket_)) {
    reused_ = true;
    Write(now);
    return absl::OkStatus();
  }
  SY_RETURN_IF_ERROR(ParseUpstreamOnce());
  Connect();
  return absl::OkStatus();
}

absl::Status ClientCall::ParseUpstreamOnce() {
  if (port_ != 0)
    return absl::OkStatus();
  absl::StatusOr<HostPort> parsed = ParseHostPort(upstream_);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("httpc: bad upstream '{}': want host:port", upstream_));
  }
  host_ = std::move(parsed->host);
  port_ = parsed->port;
  return absl::OkStatus();
}

absl::Status ClientCall::Prepare() const {
  if (loop_->stopping())
    return absl::CancelledError(fmt::format("{}: the client is stopping", Describe()));
  if (handle_->cancel_requested())
    return absl::CancelledError(fmt::format("{}: request cancelled", Describe()));
  return bad_request_;
}

void ClientCall::Connect() {
  stage_ = Stage::kConnecting;
  ArmDeadline(options_.connect_timeout);
  // A pooled connection that failed leaves its socket, closed, to connect again.
  if (!socket_.has_value())
    socket_.emplace(loop_->context());
  // An address needs no resolver (whose lookups run on a thread of Asio's).
  ErrorCode ec;
  const asio::ip::address address = asio::ip::make_address(host_, ec);
  if (!ec) {
    socket_->async_connect(tcp::endpoint(address, port_),
                           [self = shared_from_this()](const ErrorCode& connect_ec) {
                             self->OnConnected(connect_ec);
                           });
    return;
  }
  resolver_.emplace(loop_->context().get_executor());
  resolver_->async_resolve(host_, std::to_string(port_), Resolver::numeric_service,
                           [self = shared_from_this()](const ErrorCode& resolve_ec,
                                                       const Resolver::results_type& results) {
                             self->OnResolved(resolve_ec, results);
                           });
}

void ClientCall::OnResolved(const ErrorCode& ec, const Resolver::results_type& results) {
  if (stage_ != Stage::kConnecting)
    return;
  if (ec) {
    Finish(absl::UnavailableError(
        fmt::format("{}: cannot resolve '{}': {}", Describe(), host_, ec.message())));
    return;
  }
  asio::async_connect(
      *socket_, results,
      [self = shared_from_this()](const ErrorCode& connect_ec, const tcp::endpoint& /*endpoint*/) {
        self->OnConnected(connect_ec);
      });
}

void ClientCall::OnConnected(const ErrorCode& ec) {
  if (stage_ != Stage::kConnecting)
    return;
  if (ec) {
    Finish(absl::UnavailableError(fmt::format("{}: cannot connect: {}", Describe(), ec.message())));
    return;
  }
  // The request goes out in one write; later small writes on a reused connection should not
  // wait for an ACK either.
  ErrorCode option_ec;
  socket_->set_option(tcp::no_delay(true), option_ec);
  Write(std::chrono::steady_clock::now());
}

void ClientCall::Write(std::chrono::steady_clock::time_point now) {
  stage_ = Stage::kWriting;
  // The first-byte timeout covers the write too: a server that stops reading the request
  // has not answered it either.
  ArmDeadlineAt(now + first_byte_timeout_);
  const std::array<asio::const_buffer, 2> buffers = {asio::buffer(head_bytes_),
                                                     asio::buffer(body_.data(), body_.size())};
  asio::async_write(
      *socket_, buffers,
      [self = shared_from_this()](const ErrorCode& ec, size_t /*bytes*/) { self->OnWritten(ec); });
}

void ClientCall::OnWritten(const ErrorCode& ec) {
  if (stage_ != Stage::kWriting)
    return;
  if (ec) {
    FailBeforeResponse(ec, "write the request");
    return;
  }
  stage_ = Stage::kHead;
  NewParser();
  Read();
}

void ClientCall::FailBeforeResponse(const ErrorCode& ec, std::string_view step) {
  if (reused_) {
    // Most likely the server closed the idle connection as we took it: nothing it
    // processed, so the request goes again, once, on a connection of its own.
    reused_ = false;
    CloseSocket();
    in_.clear();
    if (absl::Status status = ParseUpstreamOnce(); !status.ok()) {
      Finish(status);
      return;
    }
    Connect();
    return;
  }
  Finish(absl::UnavailableError(
      fmt::format("{}: cannot {}: {} (no response byte received)", Describe(), step,
                  ec == asio::error::eof ? "connection closed" : ec.message())));
}

void ClientCall::ArmDeadline(std::chrono::milliseconds timeout) {
  timer_->deadline.Arm(timeout, timer_);
}

void ClientCall::ArmDeadlineAt(std::chrono::steady_clock::time_point deadline) {
  timer_->deadline.ArmAt(deadline, timer_);
}

void ClientCall::OnDeadline() {
  switch (stage_) {
    case Stage::kConnecting:
      Finish(absl::DeadlineExceededError(fmt::format(
          "{}: connect timed out after {} ms", Describe(), options_.connect_timeout.count())));
      return;
    case Stage::kWriting:
    case Stage::kHead:
      Finish(absl::DeadlineExceededError(fmt::format("{}: no response head within {} ms",
                                                     Describe(), first_byte_timeout_.count())));
      return;
    case Stage::kBody: {
      // A paused call is not idle: the upstream waits for us. Resume re-arms.
      if (paused_)
        return;
      const auto idle = std::chrono::steady_clock::now() - last_read_;
      if (idle < options_.idle_timeout) {
        ArmDeadline(std::chrono::ceil<std::chrono::milliseconds>(options_.idle_timeout - idle));
        return;
      }
      Finish(absl::DeadlineExceededError(
          fmt::format("{}: no body bytes for {} ms", Describe(), options_.idle_timeout.count())));
      return;
    }
    case Stage::kNew:
    case Stage::kDone:
      return;
  }
}

void ClientCall::Cancel(std::string_view reason) {
  if (stage_ == Stage::kDone)
    return;
  Finish(absl::CancelledError(fmt::format("{}: {}", Describe(), reason)));
}

void ClientCall::Abandon() {
  // Not on the loop: nothing here touches the loop or its io_context.
  stage_ = Stage::kDone;
  const std::shared_ptr<HttpResponseHandler> handler = std::move(handler_);
  handler->OnDone(absl::CancelledError(fmt::format("{}: the client is stopped", Describe())));
}

void ClientCall::Finish(const absl::Status& status) {
  if (stage_ == Stage::kDone)
    return;
  stage_ = Stage::kDone;
  if (resolver_.has_value())
    resolver_->cancel();
  CloseSocket();
  // The loop may hold the last reference.
  const std::shared_ptr<ClientCall> self = shared_from_this();
  if (pool_upstream_ != nullptr) {
    loop_->pool().Drop(pool_upstream_);
    pool_upstream_ = nullptr;
  }
  if (registered_) {
    loop_->GiveBackTimer(std::move(timer_));
    loop_->GiveBackReadBuffer(std::move(in_));
    if (parser_.has_value())
      loop_->GiveBackHeaderList(parser_->TakeHeaders());
    loop_->Remove(this);
  }
  registered_ = false;
  const std::shared_ptr<HttpResponseHandler> handler = std::move(handler_);
  body_ = {};
  handler->OnDone(status);
}

void ClientCall::CloseSocket() {
  if (!socket_.has_value())
    return;
  ErrorCode ec;
  socket_->close(ec);
}

std::string ClientCall::Describe() const {
  // The method and the target from the request line, "POST /v1/completions HTTP/1.1" (neither
  // holds a space); none when the request could not be encoded.
  const std::string_view line = head_bytes_;
  const size_t method_end = line.find(' ');
  if (method_end == std::string_view::npos)
    return fmt::format("httpc: http://{}", upstream_);
  const size_t target_end = line.find(' ', method_end + 1);
  return fmt::format("httpc: {} http://{}{}", line.substr(0, method_end), upstream_,
                     line.substr(method_end + 1, target_end - method_end - 1));
}

}  // namespace switchyard::net::internal
