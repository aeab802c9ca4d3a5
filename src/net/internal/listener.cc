#include "net/internal/listener.h"

#include <unistd.h>

#include <utility>

#include "fmt/format.h"

#include "base/logging.h"

namespace switchyard::net::internal {
namespace {

// A failed accept (EMFILE, ENFILE, ENOBUFS) usually fails again at once; retrying after a
// pause keeps the loop from spinning while descriptors are short.
constexpr std::chrono::milliseconds kAcceptRetryDelay{50};

}  // namespace

AcceptedSocket::~AcceptedSocket() {
  if (descriptor_ >= 0)
    ::close(descriptor_);
}

Socket AcceptedSocket::Adopt(asio::io_context& context, ErrorCode& ec) {
  Socket socket(context);
  socket.assign(protocol_, descriptor_, ec);
  if (!ec)
    descriptor_ = -1;
  return socket;
}

Listener::Listener(std::vector<EventLoop*> loops, ServerContext* server, AcceptCallback on_accept)
    : loops_(std::move(loops)),
      server_(server),
      on_accept_(std::move(on_accept)),
      acceptor_(loops_.front()->context()),
      retry_timer_(loops_.front()->context()) {}

absl::Status Listener::Listen(const std::string& host, int port) {
  ErrorCode ec;
  Resolver resolver(loops_.front()->context());
  const auto results = resolver.resolve(host, std::to_string(port),
                                        Resolver::passive | Resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("http: cannot resolve host '{}': {}", host, ec.message()));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  const auto fail = [&](std::string_view step) {
    return absl::UnavailableError(
        fmt::format("http: cannot {} {}:{}: {}", step, host, port, ec.message()));
  };
  if (acceptor_.open(endpoint.protocol(), ec); ec)
    return fail("open a socket for");
  if (acceptor_.set_option(Acceptor::reuse_address(true), ec); ec)
    return fail("set SO_REUSEADDR on");
  if (acceptor_.bind(endpoint, ec); ec)
    return fail("bind");
  if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec)
    return fail("listen on");
  const tcp::endpoint local = acceptor_.local_endpoint(ec);
  if (ec)
    return fail("read the port of");
  port_ = local.port();
  protocol_ = local.protocol();
  return absl::OkStatus();
}

void Listener::Start() {
  loops_.front()->poster()->Post([this] { Accept(); });
}

void Listener::Close() {
  closed_ = true;
  ErrorCode ec;
  acceptor_.close(ec);
  retry_timer_.cancel();
}

void Listener::Accept() {
  if (closed_)
    return;
  const size_t loop_index = next_loop_;
  next_loop_ = (next_loop_ + 1) % loops_.size();
  // Accepted onto this loop: registering it with its own loop is that loop's job.
  acceptor_.async_accept([this, loop_index](const ErrorCode& ec, Socket socket) {
    OnAccept(ec, std::move(socket), loop_index);
  });
}

void Listener::OnAccept(const ErrorCode& ec, Socket socket, size_t loop_index) {
  if (closed_)
    return;
  if (ec) {
    SY_LOG_WARN("http: accept failed: {}", ec.message());
    retry_timer_.expires_after(kAcceptRetryDelay);
    retry_timer_.async_wait([this](const ErrorCode& wait_ec) {
      if (!wait_ec)
        Accept();
    });
    return;
  }
  ErrorCode socket_ec;
  const tcp::endpoint remote = socket.remote_endpoint(socket_ec);
  if (socket_ec) {  // reset before we looked at it
    socket.close(socket_ec);
    Accept();
    return;
  }
  ConnectionAdmission::Refusal refusal;
  ConnectionSlot slot = server_->admission->Take(remote.address().to_string(), &refusal);
  if (refusal != ConnectionAdmission::Refusal::kNone) {
    SY_LOG_DEBUG("http: refusing a connection from {}: {}", remote.address().to_string(),
                 refusal == ConnectionAdmission::Refusal::kClientLimit
                     ? "the client's connection limit"
                     : "the server's connection limit");
    socket.close(socket_ec);
  } else if (const int descriptor = socket.release(socket_ec); socket_ec) {
    SY_LOG_WARN("http: cannot hand over an accepted connection: {}", socket_ec.message());
    socket.close(socket_ec);
  } else {
    on_accept_(loop_index, AcceptedSocket(protocol_, descriptor, std::move(slot)));
  }
  Accept();
}

}  // namespace switchyard::net::internal
