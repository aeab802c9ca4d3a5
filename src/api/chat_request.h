// POST /v1/chat/completions request: messages plus the shared sampling fields, parsed and
// validated the way vLLM does. Template fields (and the tools list) are kept as raw JSON for
// the chat template renderer. Plain values; any thread may parse.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "api/request_body.h"
#include "api/sampling_request.h"
#include "api/tool_choice.h"

namespace switchyard::api {

struct ChatMessage {
  std::string role;  // system | developer | user | assistant | tool
  // Text of a string content, or the text parts joined with "\n" (how vLLM flattens them for
  // text-only models). has_content is false for JSON null / absent (assistant tool calls).
  std::string content;
  bool has_content = false;
  std::string name;
  std::string tool_call_id;
  std::string tool_calls;  // Raw JSON array, empty when absent.
  std::string reasoning;   // Assistant "reasoning" (or legacy "reasoning_content").
};

struct ChatRequest {
  std::string model;  // Not read by kRoute.
  std::vector<ChatMessage> messages;
  bool logprobs = false;
  int top_logprobs = 0;
  bool echo = false;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool add_special_tokens = false;
  std::string chat_template;  // Per-request template override; empty: the model's.
  // chat_template_kwargs as (key, raw JSON value); keys the renderer sets itself are dropped.
  std::vector<std::pair<std::string, std::string>> chat_template_kwargs;
  ToolFields tools;
  std::string reasoning_effort;
  SamplingRequest sampling;
};

// Parses and validates `body`, every field or (kRoute) the messages, what renders them and
// the routing fields. Errors as ParseCompletionRequest; message errors name "messages" or
// "messages[i].<field>".
absl::StatusOr<ChatRequest> ParseChatRequest(RequestBody body, const RequestLimits& limits,
                                             ParseScope scope = ParseScope::kServe);

}  // namespace switchyard::api
