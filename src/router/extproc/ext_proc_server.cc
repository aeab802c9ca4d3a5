#include "router/extproc/ext_proc_server.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "fmt/format.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "router/extproc/completion_queues.h"
#include "router/extproc/health_service.h"
#include "router/extproc/process_stream.h"

namespace switchyard::router::extproc {
namespace {

namespace pb = envoy::service::ext_proc::v3;

// One gRPC server on host:port (0: a free one): the health service (and UNIMPLEMENTED for
// other unknown methods) on its generic service, `process` (when given) besides; each call on
// its completion queues' threads.
class GrpcServer {
 public:
  absl::Status Start(const std::string& host, int port, ProcessStream::Service* process,
                     int threads, const std::string& name, PickBackend* backend,
                     const ExtProcServerOptions* options, HealthStatus* health) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(fmt::format("{}:{}", host, port), grpc::InsecureServerCredentials(),
                             &port_);
    if (process != nullptr)
      builder.RegisterService(process);
    builder.RegisterAsyncGenericService(&generic_);
    queues_.emplace(&builder, threads);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0)
      return absl::UnavailableError(fmt::format("gRPC could not listen on {}:{}", host, port));
    // One call awaited per queue, the health's on the first (it gets few).
    HealthCall::Await(&generic_, &*queues_, queues_->queue(0), health);
    if (process != nullptr) {
      for (size_t i = 0; i < queues_->size(); ++i)
        ProcessStream::Await(process, &*queues_, queues_->queue(i), backend, options);
    }
    queues_->Start(name);
    return absl::OkStatus();
  }

  int port() const { return port_; }

  // Cancels the calls still open, then waits for their queues to drain. Idempotent.
  void Stop() {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_->Wait();
    }
    if (queues_.has_value())
      queues_->Shutdown();
    server_.reset();
  }

 private:
  grpc::AsyncGenericService generic_;
  std::optional<CompletionQueues> queues_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

class ExtProcServerImpl final : public ExtProcServer {
 public:
  ExtProcServerImpl(const ExtProcServerOptions& options, PickBackend* backend)
      : options_(options), backend_(backend) {}
  ~ExtProcServerImpl() override { Stop(); }

  absl::Status Init() {
    SetServing(false);
    if (absl::Status status =
            server_.Start(options_.host, options_.port, &service_, options_.threads, "extproc",
                          backend_, &options_, &health_);
        !status.ok())
      return status;
    if (options_.health_port >= 0) {
      health_server_.emplace();
      return health_server_->Start(options_.host, options_.health_port, nullptr, 1, "grpc-health",
                                   backend_, &options_, &health_);
    }
    return absl::OkStatus();
  }

  int port() const override { return server_.port(); }
  int health_port() const override {
    return health_server_.has_value() ? health_server_->port() : -1;
  }
  void SetServing(bool serving) override { health_.Set(serving); }
  void Stop() override {
    // Streams still open are cancelled at once (their requests end, releasing their picks).
    server_.Stop();
    if (health_server_.has_value())
      health_server_->Stop();
  }

 private:
  const ExtProcServerOptions options_;
  PickBackend* const backend_;
  ProcessStream::Service service_;
  HealthStatus health_;
  GrpcServer server_;
  std::optional<GrpcServer> health_server_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ExtProcServer>> ExtProcServer::Start(
    const ExtProcServerOptions& options, PickBackend* backend) {
  auto server = std::make_unique<ExtProcServerImpl>(options, backend);
  if (absl::Status status = server->Init(); !status.ok())
    return status;
  return server;
}

}  // namespace switchyard::router::extproc
