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
                       double shutdown_timeout_s) {
  if (shutdown_timeout_s < 0)
    return absl::InvalidArgumentError("--shutdown-timeout must be >= 0");
  SY_ASSIGN_OR_RETURN(router::RouterConfig config, router::LoadRouterConfig(config_path));
  if (port_override >= 0)
    config.port = port_override;
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  SY_ASSIGN_OR_RETURN(std::unique_ptr<router::RouterServer> server,
                      router::RouterServer::Start(config));
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
  auto shutdown_timeout = std::make_shared<double>(kDefaultShutdownTimeoutS);
  CLI::App* cmd = app.add_subcommand("router", "Route OpenAI requests across a fleet of engines");
  cmd->add_option("--config", *config, "router.yaml")->required();
  cmd->add_option("--port", *port, "overrides listen.port (0 picks a free port)");
  cmd->add_option("--shutdown-timeout", *shutdown_timeout,
                  "seconds requests in flight may take to finish after SIGTERM/SIGINT")
      ->capture_default_str();
  cmd->callback([config, port, shutdown_timeout, exit_code] {
    *exit_code = ExitCode(RunRouter(*config, *port, *shutdown_timeout));
  });
}

}  // namespace switchyard::cli
