// Tool-call parsers: read the tool calls out of a model's text, as vLLM's --tool-call-parser
// NAME does (hermes, llama3_json, mistral, qwen3_coder / qwen3_xml), plus the two forced tool
// choices (a named tool: the whole output is its arguments; "required": vLLM's JSON array of {name,
// parameters}).
//
// A parser is a pure function of the output text so far: Parse(text, final = false) reports
// only what more text cannot change (the content before a call starts, each call once its
// name is complete, its arguments as far as they go), so a stream can send the difference
// between two parses; Parse(text, true) is the non-streaming answer. The parsers read
// untrusted model output: garbage gives content (or fewer calls), never a crash.
//
// Arguments are the raw JSON text of the arguments value as the model wrote it (vLLM writes
// json.dumps of it, the same text when the model spaces its JSON as json.dumps does).
// Immutable; any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "api/tool_choice.h"

namespace switchyard::api {

struct ParsedToolCall {
  std::string name;
  std::string arguments;
};

struct ToolParse {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// The form of the ids a parser's calls get: vLLM's "chatcmpl-tool-<32 hex>", or Mistral's 9
// alphanumerics.
enum class ToolCallIdKind { kRandom, kMistral };

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  virtual ToolParse Parse(std::string_view text, bool final) const = 0;
  virtual ToolCallIdKind id_kind() const { return ToolCallIdKind::kRandom; }
  // A parser that reads one request's calls with its tools' schemas, or null when this one
  // needs none.
  virtual std::shared_ptr<const ToolParser> ForRequest(
      const std::vector<ToolFunction>& /*tools*/) const {
    return nullptr;
  }
};

// The --tool-call-parser names served, in the order the CLI lists them.
const std::vector<std::string_view>& ToolParserNames();

// InvalidArgument naming the known parsers for an unknown name.
absl::StatusOr<std::shared_ptr<const ToolParser>> MakeToolParser(std::string_view name);

// <tool_call>{"name": ..., "arguments": {...}}</tool_call> ... (Hermes, Qwen2.5, Qwen3).
std::shared_ptr<const ToolParser> NewHermesToolParser();
// [<|python_tag|>]{"name": ..., "parameters"|"arguments": {...}}; {...} (Llama 3.1-3.3).
std::shared_ptr<const ToolParser> NewLlama3JsonToolParser();
// [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]name{...} (Mistral).
std::shared_ptr<const ToolParser> NewMistralToolParser();
// <tool_call><function=name><parameter=key>value</parameter>...</function></tool_call>
// (Qwen3-Coder; vLLM's qwen3_coder and qwen3_xml). Values are typed by ForRequest's schemas.
std::shared_ptr<const ToolParser> NewQwen3CoderToolParser();
// tool_choice naming `name`: the output is that call's arguments.
std::shared_ptr<const ToolParser> NewNamedToolParser(std::string name);
// tool_choice "required": [{"name": ..., "parameters": {...}}, ...].
std::shared_ptr<const ToolParser> NewRequiredToolParser();

}  // namespace switchyard::api
