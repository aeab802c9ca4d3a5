// vLLM's tool-calling and reasoning flags (--enable-auto-tool-choice, --tool-call-parser,
// --reasoning-parser, --exclude-tools-when-tool-choice-none), shared by `switchyard engine`
// and `switchyard up`, which passes them to each of its engines. Main thread only.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

#include "engine/engine_server.h"

namespace switchyard::cli {

struct ToolFlags {
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;
  bool exclude_tools_when_tool_choice_none = false;
};

void AddToolFlags(CLI::App* cmd, ToolFlags* flags);

// InvalidArgument for --enable-auto-tool-choice without --tool-call-parser (as vLLM); unknown
// parser names are refused when the engine starts.
absl::Status ApplyToolFlags(const ToolFlags& flags, engine::EngineServerOptions* options);

}  // namespace switchyard::cli
