// The `switchyard` binary: one entry point, one subcommand per job.
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

#include "base/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"Switchyard: an LLM serving stack (engine and router)", "switchyard"};
  app.set_version_flag("--version", "switchyard " SWITCHYARD_VERSION);
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();

  int exit_code = 0;
  switchyard::cli::RegisterModelCommand(app, &exit_code);
  switchyard::cli::RegisterTokenizeCommand(app, &exit_code);
  switchyard::cli::RegisterChatTemplateCommand(app, &exit_code);
  switchyard::cli::RegisterGenerateCommand(app, &exit_code);
  switchyard::cli::RegisterEngineCommand(app, &exit_code);
  switchyard::cli::RegisterUpCommand(app, &exit_code);
  switchyard::cli::RegisterRouterCommand(app, &exit_code);
  switchyard::cli::RegisterKvEventsDemoCommand(app, &exit_code);
  switchyard::cli::RegisterCacheCommand(app, &exit_code);

  app.parse_complete_callback([&] {
    if (!switchyard::base::SetLogLevel(log_level)) {
      throw CLI::ValidationError("--log-level", "unknown level '" + log_level + "'");
    }
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
