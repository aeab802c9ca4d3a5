// The tool fields of a chat request (tools, tool_choice, parallel_tool_calls), read and
// validated as vLLM's ChatCompletionRequest does, and the JSON schema a forced tool choice
// constrains the output to (vLLM's structured output for a named tool or "required").
// Plain values and stateless functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace switchyard::api {

namespace internal {
class FieldReader;
}  // namespace internal

// vLLM's default is "none" without tools and "auto" with them.
enum class ToolChoiceMode { kNone, kAuto, kRequired, kNamed };

struct ToolFunction {
  std::string name;
  std::string parameters;  // Minified JSON schema; empty when the tool has none.
};

struct ToolFields {
  std::string tools;  // Raw JSON array (what the chat template renders); empty when absent.
  std::vector<ToolFunction> functions;
  ToolChoiceMode choice = ToolChoiceMode::kNone;
  std::string choice_name;  // kNamed: the forced function
  std::optional<bool> parallel_tool_calls;
};

// Reads the tool fields. Errors are InvalidParam with vLLM's messages and params: an empty
// tools list, a tool without function.name, tool_choice without tools, a named choice that is
// malformed or names no listed tool.
absl::Status ReadToolFields(internal::FieldReader& fields, ToolFields* out);

// The schema the output must match for a forced choice: the named tool's parameters, or for
// "required" vLLM's array of calls (minItems 1, each {"name": one tool's name, "parameters":
// that tool's schema}, the tools' $defs hoisted to the root so their references resolve).
// A tool without parameters takes an empty object. InvalidParam ("tools") when two tools
// define one $defs name differently. REQUIRES: choice is kNamed or kRequired.
absl::StatusOr<std::string> ForcedToolSchema(const ToolFields& tools);

}  // namespace switchyard::api
