#include "router/extproc/ext_proc_server.h"

#include <chrono>
#include <string>
#include <utility>

#include "fmt/format.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "router/extproc/process_stream.h"

namespace switchyard::router::extproc {
namespace {

namespace pb = envoy::service::ext_proc::v3;

// The health service's names: the whole server's (""), llm-d's EPP's probes', the protocol's.
constexpr const char* kHealthNames[] = {"", "liveness", "readiness",
                                        "envoy.service.ext_proc.v3.ExternalProcessor"};

class ProcessService final : public pb::ExternalProcessor::CallbackService {
 public:
  ProcessService(PickBackend* backend, const ExtProcServerOptions* options)
      : backend_(backend), options_(options) {}

  grpc::ServerBidiReactor<pb::ProcessingRequest, pb::ProcessingResponse>* Process(
      grpc::CallbackServerContext*) override {
    return ProcessStream::Open(backend_, options_);
  }

 private:
  PickBackend* const backend_;
  const ExtProcServerOptions* const options_;
};

// Builds and starts a gRPC server on host:port (0: a free one) with `service`, or, for the
// health server, `unknown` (every other method UNIMPLEMENTED, on gRPC's callback threads as
// the health service); `*bound` gets the port.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& host, int port,
                                                          grpc::Service* service,
                                                          grpc::CallbackGenericService* unknown,
                                                          int* bound) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("{}:{}", host, port), grpc::InsecureServerCredentials(),
                           bound);
  if (service != nullptr)
    builder.RegisterService(service);
  else
    builder.RegisterCallbackGenericService(unknown);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound == 0)
    return absl::UnavailableError(fmt::format("gRPC could not listen on {}:{}", host, port));
  return server;
}

void SetHealth(grpc::Server* server, bool serving) {
  if (server == nullptr)
    return;
  for (const char* name : kHealthNames)
    server->GetHealthCheckService()->SetServingStatus(name, serving);
}

class ExtProcServerImpl final : public ExtProcServer {
 public:
  ExtProcServerImpl(const ExtProcServerOptions& options, PickBackend* backend)
      : options_(options), service_(backend, &options_) {}
  ~ExtProcServerImpl() override { Stop(); }

  absl::Status Init() {
    // Every server built from here has grpc.health.v1.Health.
    grpc::EnableDefaultHealthCheckService(true);
    auto server = StartServer(options_.host, options_.port, &service_, nullptr, &port_);
    if (!server.ok())
      return server.status();
    server_ = *std::move(server);
    if (options_.health_port >= 0) {
      auto health =
          StartServer(options_.host, options_.health_port, nullptr, &unknown_, &health_port_);
      if (!health.ok())
        return health.status();
      health_ = *std::move(health);
    }
    SetServing(false);
    return absl::OkStatus();
  }

  int port() const override { return port_; }
  int health_port() const override { return health_ != nullptr ? health_port_ : -1; }
  void SetServing(bool serving) override {
    SetHealth(server_.get(), serving);
    SetHealth(health_.get(), serving);
  }
  void Stop() override {
    // Streams still open are cancelled at once (their requests end, releasing their picks).
    const auto now = std::chrono::system_clock::now();
    if (server_ != nullptr) {
      server_->Shutdown(now);
      server_->Wait();
      server_.reset();
    }
    if (health_ != nullptr) {
      health_->Shutdown(now);
      health_->Wait();
      health_.reset();
    }
  }

 private:
  const ExtProcServerOptions options_;
  ProcessService service_;
  grpc::CallbackGenericService unknown_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_;
  int port_ = 0;
  int health_port_ = 0;
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
