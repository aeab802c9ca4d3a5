// switchyard router --config router.yaml: the fleet's OpenAI endpoint (router/). SIGINT and
// SIGTERM are blocked before any thread starts and taken by sigwait on the main thread,
// which then drains the router for up to --shutdown-timeout seconds (router_drain.h) and
// stops it; the process exits 0.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/router_drain.h"

#include "base/status_macros.h"
#include "router/router_config.h"
#include "router/router_server.h"

namespace switchyard::cli {
namespace {

absl::Status RunRouter(const std::string& config_path, int port_override,
                       int ext_proc_port_override, int grpc_health_port_override,
                       double shutdown_timeout_s) {
  if (shutdown_timeout_s < 0)
    return absl::InvalidArgumentError("--shutdown-timeout must be >= 0");
  SY_ASSIGN_OR_RETURN(router::RouterConfig config, router::LoadRouterConfig(config_path));
  if (port_override >= 0)
    config.port = port_override;
  if (ext_proc_port_override >= 0)
    config.ext_proc_port = ext_proc_port_override;
  if (grpc_health_port_override >= 0)
    config.grpc_health_port = grpc_health_port_override;
  if (config.grpc_health_port >= 0 && config.ext_proc_port < 0)
    return absl::InvalidArgumentError("--grpc-health-port needs --ext-proc-port (extProc.port)");
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  SY_ASSIGN_OR_RETURN(std::unique_ptr<router::RouterServer> server,
                      router::RouterServer::Start(config));
  // Before the ready line, which the ports must be known by.
  if (server->ext_proc_port() >= 0) {
    std::printf(
        "switchyard router: ext_proc on %s:%d, gRPC health on %s:%d\n", config.host.c_str(),
        server->ext_proc_port(), config.host.c_str(),
        server->grpc_health_port() >= 0 ? server->grpc_health_port() : server->ext_proc_port());
  }
  std::printf("switchyard router: serving %s on http://%s:%d\n", config.model.c_str(),
              config.host.c_str(), server->port());
  std::fflush(stdout);
  DrainRouterOnSignal(signals, std::chrono::duration<double>(shutdown_timeout_s), server.get(),
                      "switchyard router");
  server->Stop();
  return absl::OkStatus();
}

}  // namespace

void RegisterRouterCommand(CLI::App& app, int* exit_code) {
  auto config = std::make_shared<std::string>();
  auto port = std::make_shared<int>(-1);
  auto ext_proc_port = std::make_shared<int>(-1);
  auto grpc_health_port = std::make_shared<int>(-1);
  auto shutdown_timeout = std::make_shared<double>(kDefaultShutdownTimeoutS);
  CLI::App* cmd = app.add_subcommand("router", "Route OpenAI requests across a fleet of engines");
  cmd->add_option("--config", *config, "router.yaml")->required();
  cmd->add_option("--port", *port, "overrides listen.port (0 picks a free port)");
  cmd->add_option("--ext-proc-port", *ext_proc_port,
                  "serves Envoy ext_proc (the Endpoint Picker Protocol) over gRPC on this port; "
                  "overrides extProc.port (0 picks a free port)");
  cmd->add_option("--grpc-health-port", *grpc_health_port,
                  "the gRPC health service's own port; overrides extProc.healthPort");
  cmd->add_option("--shutdown-timeout", *shutdown_timeout,
                  "seconds requests in flight may take to finish after SIGTERM/SIGINT")
      ->capture_default_str();
  cmd->callback([config, port, ext_proc_port, grpc_health_port, shutdown_timeout, exit_code] {
    *exit_code =
        ExitCode(RunRouter(*config, *port, *ext_proc_port, *grpc_health_port, *shutdown_timeout));
  });
}

}  // namespace switchyard::cli
