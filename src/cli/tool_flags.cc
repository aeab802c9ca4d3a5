#include "cli/tool_flags.h"

#include "fmt/format.h"
#include "fmt/ranges.h"

#include "api/reasoning_parser.h"
#include "api/tool_parser.h"

namespace switchyard::cli {

void AddToolFlags(CLI::App* cmd, ToolFlags* f) {
  cmd->add_flag("--enable-auto-tool-choice", f->enable_auto_tool_choice,
                "parse tool calls out of the output for tool_choice \"auto\"");
  cmd->add_option("--tool-call-parser", f->tool_call_parser,
                  fmt::format("tool call format: {}", fmt::join(api::ToolParserNames(), ", ")));
  cmd->add_option(
      "--reasoning-parser", f->reasoning_parser,
      fmt::format("split <think> reasoning out: {}", fmt::join(api::ReasoningParserNames(), ", ")));
  cmd->add_flag("--exclude-tools-when-tool-choice-none", f->exclude_tools_when_tool_choice_none,
                "leave the tools out of the prompt when tool_choice is \"none\"");
}

absl::Status ApplyToolFlags(const ToolFlags& f, engine::EngineServerOptions* o) {
  if (f.enable_auto_tool_choice && f.tool_call_parser.empty())
    return absl::InvalidArgumentError("--enable-auto-tool-choice requires --tool-call-parser");
  o->enable_auto_tool_choice = f.enable_auto_tool_choice;
  o->tool_call_parser = f.tool_call_parser;
  o->reasoning_parser = f.reasoning_parser;
  o->exclude_tools_when_tool_choice_none = f.exclude_tools_when_tool_choice_none;
  return absl::OkStatus();
}

}  // namespace switchyard::cli
