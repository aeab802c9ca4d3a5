#include "net/http_server.h"

#include <memory>
#include <utility>
#include <vector>

#include "fmt/format.h"

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

std::optional<std::string_view> HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name)
      return value;
  }
  return std::nullopt;
}

namespace {

using internal::ConnectionRegistry;
using internal::EventLoop;
using internal::HttpConnection;
using internal::Listener;
using internal::ServerContext;
using internal::tcp;

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(const HttpServerOptions& options, HttpHandler handler)
      : registries_(static_cast<size_t>(options.num_threads)) {
    // spdlog creates its registry on first use, inside the uninstrumented libspdlog, so TSan
    // cannot see that creation synchronised; making the first use here, before the loops
    // start, keeps it off them.
    spdlog::default_logger_raw();
    context_.options = options;
    if (!context_.options.error_body)
      context_.options.error_body = internal::DefaultErrorBody;
    context_.handler = std::move(handler);
    std::vector<EventLoop*> loops;
    for (int i = 0; i < options.num_threads; ++i) {
      loops_.push_back(std::make_unique<EventLoop>(fmt::format("sy-http-{}", i)));
      loops.push_back(loops_.back().get());
    }
    listener_ = std::make_unique<Listener>(
        std::move(loops), &context_,
        [this](size_t loop_index, tcp::socket socket) { Adopt(loop_index, std::move(socket)); });
  }

  ~HttpServerImpl() override { Stop(); }

  absl::Status Listen() {
    SY_RETURN_IF_ERROR(listener_->Listen(context_.options.host, context_.options.port));
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
    // No new connections; then close every connection on its own loop (running their
    // close callbacks); then let what responders posted meanwhile run and stop the loops.
    loops_.front()->RunAndWait([this] { listener_->Close(); });
    for (size_t i = 0; i < loops_.size(); ++i)
      loops_[i]->RunAndWait([this, i] { registries_[i].CloseAll(); });
    for (auto& loop : loops_)
      loop->Stop();
  }

 private:
  // On the accepting loop: starts the connection on its own loop.
  void Adopt(size_t loop_index, tcp::socket socket) {
    EventLoop& loop = *loops_[loop_index];
    const bool posted =
        loop.poster()->Post([this, loop_index, socket = std::move(socket)]() mutable {
          auto connection = std::make_shared<HttpConnection>(
              std::move(socket), &context_, &registries_[loop_index], loops_[loop_index]->poster());
          registries_[loop_index].Add(connection);
          connection->Start();
        });
    if (!posted)
      --context_.num_connections;
  }

  ServerContext context_;
  // Destroyed last: the io_contexts outlive every socket and timer on them.
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<ConnectionRegistry> registries_;  // registries_[i] is used on loops_[i] only
  std::unique_ptr<Listener> listener_;
  base::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  if (options.num_threads < 1)
    return absl::InvalidArgumentError("http: num_threads must be at least 1");
  if (!handler)
    return absl::InvalidArgumentError("http: no handler");
  auto server = std::make_unique<HttpServerImpl>(options, std::move(handler));
  SY_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace switchyard::net
