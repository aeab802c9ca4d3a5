// Subcommands of the `switchyard` binary. Each Register* adds one CLI11 subcommand to
// `app` and binds its callback; the callback runs on the main thread and returns the
// process exit code through `*exit_code` (0 ok, 1 runtime error, 2 usage error: exit_code.h).
#pragma once

#include "CLI/CLI.hpp"

namespace switchyard::cli {

// switchyard model inspect PATH
void RegisterModelCommand(CLI::App& app, int* exit_code);
// switchyard tokenize --model PATH TEXT
void RegisterTokenizeCommand(CLI::App& app, int* exit_code);
// switchyard chat-template --model PATH MESSAGES.json
void RegisterChatTemplateCommand(CLI::App& app, int* exit_code);
// switchyard generate --model PATH --prompt TEXT -n N
void RegisterGenerateCommand(CLI::App& app, int* exit_code);
// switchyard engine --model PATH [--port P ...]
void RegisterEngineCommand(CLI::App& app, int* exit_code);
// switchyard up [--engines N | --sim N] [--port P]
void RegisterUpCommand(CLI::App& app, int* exit_code);
// switchyard router --config router.yaml
void RegisterRouterCommand(CLI::App& app, int* exit_code);
// switchyard cache ls|verify|prune|stats [--dir D] [--redis HOST:PORT --key-file F]
void RegisterCacheCommand(CLI::App& app, int* exit_code);
// switchyard kv-events-demo --endpoint E [--replay-endpoint R] [--count N]
void RegisterKvEventsDemoCommand(CLI::App& app, int* exit_code);

}  // namespace switchyard::cli
