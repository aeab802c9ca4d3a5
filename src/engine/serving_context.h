// ServingContext: what the OpenAI routes of one engine need to turn HTTP requests into
// EngineRequests and results back into responses: the engine core, the tokenizer and chat
// template of the served checkpoint, its name and context length, the request limits and
// the model's default sampling settings (generation_config.json, as vLLM's
// --generation-config auto applies them).
//
// Immutable after construction (the drain gate it points to is thread-safe); shared by every
// HTTP loop thread. Borrows everything it points to.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

#include "api/reasoning_parser.h"
#include "api/sampling_request.h"
#include "api/tool_parser.h"
#include "base/drain_gate.h"
#include "engine/engine_core.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"
#include "structured/grammar_cache.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace switchyard::engine {

// Defaults from generation_config.json; unset fields fall back to vLLM's (temperature 1,
// top_p 1, top_k off, min_p 0, repetition_penalty 1).
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int32_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
};

// Reads the sampling fields of a generation_config.json; an empty path gives no defaults.
// Null fields are unset; a field that is not a number is an error naming it.
absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& path);

struct ServingContext {
  EngineCore* engine = nullptr;
  const text::Tokenizer* tokenizer = nullptr;
  // Null when the checkpoint has no chat template (chat requests then get a 400).
  const text::ChatTemplate* chat_template = nullptr;
  text::ModelChatTemplate chat_special_tokens;
  EngineMetrics* metrics = nullptr;
  std::string served_model_name;
  std::string model_root;  // where the weights came from (/v1/models "root")
  int64_t max_model_len = 0;
  int64_t created = 0;  // Unix seconds the server started (/v1/models "created")
  api::RequestLimits limits;
  GenerationDefaults defaults;
  bool priority_scheduling = false;
  // vLLM's --enable-auto-tool-choice and --tool-call-parser: tool_choice "auto" (the default
  // with tools) needs both, else it is refused. --reasoning-parser splits <think> output.
  // Null: not configured.
  bool enable_auto_tool_choice = false;
  std::shared_ptr<const api::ToolParser> tool_parser;
  std::shared_ptr<const api::ReasoningParser> reasoning_parser;
  // vLLM's --exclude-tools-when-tool-choice-none: by default tool_choice "none" still renders
  // the tools into the prompt.
  bool exclude_tools_when_tool_choice_none = false;
  // Compiled structured-output grammars, shared by the HTTP threads; null compiles each time.
  structured::GrammarCache* grammars = nullptr;
  std::string version;  // GET /version
  // The shutdown drain: refuses new generation requests and fails /health once it began.
  // Null: no drain (requests are always admitted).
  base::DrainGate* drain = nullptr;
  // What the runner did at start-up and its sizes (GET /debug/startup).
  RunnerStartup startup;
  RunnerLimits runner_limits;
};

// NotFound (vLLM's message) unless `model` is empty or the served model's name.
absl::Status CheckServedModel(const ServingContext& ctx, const std::string& model);

}  // namespace switchyard::engine
