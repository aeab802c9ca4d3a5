#include "net/http_server.h"

#include <memory>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "net/internal/beast.h"
#include "net/internal/connection.h"
#include "net/internal/event_loop.h"
#include "net/internal/listener.h"
#include "net/internal/server_context.h"
#include "net/internal/wire.h"

namespace switchyard::net {

namespace {

using internal::AcceptedSocket;
using internal::ConnectionRegistry;
using internal::ErrorCode;
using internal::EventLoop;
using internal::HttpConnection;
using internal::Listener;
using internal::ServerContext;
using internal::Socket;

class HttpServerImpl final : public HttpServer {
 public:
  // `owns_loops`: Stop stops them too.
  HttpServerImpl(const HttpServerOptions& options, HttpHandler handler,
                 std::shared_ptr<EventLoops> loops, bool owns_loops)
      : loops_(std::move(loops)), owns_loops_(owns_loops), registries_(loops_->size()) {
    context_.options = options;
    if (!context_.options.error_body)
      context_.options.error_body = internal::DefaultErrorBody;
    context_.handler = std::move(handler);
    context_.admission = std::make_unique<internal::ConnectionAdmission>(
        options.max_connections, options.max_connections_per_client);
    std::vector<EventLoop*> accept_loops;
    for (size_t i = 0; i < loops_->size(); ++i)
      accept_loops.push_back(&loops_->loop(i));
    listener_ = std::make_unique<Listener>(
        std::move(accept_loops), &context_,
        [this](size_t loop_index, AcceptedSocket socket) { Adopt(loop_index, std::move(socket)); });
  }

  ~HttpServerImpl() override { Stop(); }

  absl::Status Listen() {
    absl::Status status = absl::UnavailableError("http: the event loops are stopped");
    loops_->loop(0).RunAndWait(
        [&] { status = listener_->Listen(context_.options.host, context_.options.port); });
    SY_RETURN_IF_ERROR(status);
    listener_->Start();
    return absl::OkStatus();
  }

  int port() const override { return listener_->port(); }

  void Stop() override {
    {
      base::MutexLock lock(&stop_mu_);
      if (stopped_)
        return;
      stopped_ = true;
    }
    // No new connections: the second round on the accepting loop runs after the accepts
    // that completed meanwhile, which posted their connections' starts to the loops. Then
    // close every connection on its own loop (running their close callbacks), after those
    // starts. What is left posted touches only connections, which are closed.
    EventLoop& accepting = loops_->loop(0);
    accepting.RunAndWait([this] { listener_->Close(); });
    accepting.RunAndWait([] {});
    for (size_t i = 0; i < loops_->size(); ++i)
      loops_->loop(i).RunAndWait([this, i] { registries_[i].CloseAll(); });
    if (owns_loops_)
      loops_->Stop();
  }

 private:
  // On the accepting loop: starts the connection on its own loop. One taken past
  // max_connections starts only if that loop sheds a connection for it (the one idle, or
  // stalled in its request head, the longest); else it is closed.
  void Adopt(size_t loop_index, AcceptedSocket accepted) {
    EventLoop& loop = loops_->loop(loop_index);
    // A refused post destroys the socket, and with it its slot.
    loop.poster()->Post([this, loop_index, accepted = std::move(accepted)]() mutable {
      EventLoop& own_loop = loops_->loop(loop_index);
      ErrorCode ec;
      Socket socket = accepted.Adopt(own_loop.context(), ec);
      if (ec) {
        SY_LOG_WARN("http: cannot adopt an accepted connection: {}", ec.message());
        return;
      }
      const bool over_capacity = accepted.over_capacity();
      ConnectionRegistry& registry = registries_[loop_index];
      auto connection = std::make_shared<HttpConnection>(std::move(socket), accepted.TakeSlot(),
                                                         &context_, &registry, &own_loop);
      registry.Add(connection);
      if (over_capacity && !registry.ShedLongestWaiting(connection.get())) {
        SY_LOG_DEBUG("http: closing a new connection: {} open, none idle",
                     context_.admission->open());
        connection->Close();
        return;
      }
      connection->Start();
    });
  }

  ServerContext context_;
  // Destroyed last: the io_contexts outlive every socket and timer on them.
  const std::shared_ptr<EventLoops> loops_;
  const bool owns_loops_;
  std::vector<ConnectionRegistry> registries_;  // registries_[i] is used on loop i only
  std::unique_ptr<Listener> listener_;
  base::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

absl::StatusOr<std::unique_ptr<HttpServer>> StartServer(const HttpServerOptions& options,
                                                        HttpHandler handler,
                                                        std::shared_ptr<EventLoops> loops,
                                                        bool owns_loops) {
  if (!handler)
    return absl::InvalidArgumentError("http: no handler");
  auto server =
      std::make_unique<HttpServerImpl>(options, std::move(handler), std::move(loops), owns_loops);
  SY_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  if (options.num_threads < 1)
    return absl::InvalidArgumentError("http: num_threads must be at least 1");
  SY_ASSIGN_OR_RETURN(std::shared_ptr<EventLoops> loops,
                      EventLoops::Start(options.num_threads, "sy-http"));
  return StartServer(options, std::move(handler), std::move(loops), true);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler,
                                                              std::shared_ptr<EventLoops> loops) {
  if (loops == nullptr)
    return absl::InvalidArgumentError("http: no loops");
  return StartServer(options, std::move(handler), std::move(loops), false);
}

}  // namespace switchyard::net
