#include "api/chat_request.h"

#include <algorithm>
#include <array>

#include "absl/utility/utility.h"
#include "fmt/format.h"

#include "api/error.h"
#include "api/internal/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::api {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};

// Template variables the server owns (CVE-2025-62426: {"tokenize": true} in kwargs blocked
// vLLM's event loop). A client value for these is dropped, as vLLM 0.11.1+ does.
constexpr std::array<std::string_view, 7> kReservedTemplateKwargs = {
    "tokenize",     "return_dict", "return_assistant_tokens_mask", "chat_template", "messages",
    "conversation", "tools"};

// "messages[i]" and a path within it, the param of an error: built only for an error, as
// formatting it costs more than reading a message.
std::string MessageParam(size_t index, std::string_view path = {}) {
  return fmt::format("messages[{}]{}", index, path);
}

// A string at messages[index]<path>, or ReadString's error naming it.
absl::StatusOr<std::string_view> ReadMessageString(element value, size_t index,
                                                   std::string_view path) {
  std::string_view text;
  if (value.get(text) == simdjson::SUCCESS)
    return text;
  return internal::ReadString(value, MessageParam(index, path));
}

absl::Status ReadContent(element value, size_t index, ChatMessage* out) {
  std::string_view text;
  if (value.get(text) == simdjson::SUCCESS) {
    out->content = std::string(text);
    out->has_content = true;
    return absl::OkStatus();
  }
  array parts;
  if (value.get(parts) != simdjson::SUCCESS) {
    const std::string param = MessageParam(index, ".content");
    return InvalidParam(
        param, fmt::format("{}: Input should be a string or a list of content parts.", param));
  }
  out->has_content = true;
  bool first = true;
  for (element part_value : parts) {
    object part;
    if (part_value.get(part) != simdjson::SUCCESS) {
      const std::string param = MessageParam(index, ".content");
      return InvalidParam(param, fmt::format("{}: each content part must be an object.", param));
    }
    internal::FieldReader fields(part);
    std::string type;
    SY_RETURN_IF_ERROR(fields.String("type", &type));
    if (type != "text") {
      const std::string param = MessageParam(index, ".content");
      return InvalidParam(param, fmt::format("{}: only content parts of type text are supported "
                                             "by this model.",
                                             param));
    }
    std::optional<element> part_text = fields.Get("text");
    if (!part_text) {
      const std::string param = MessageParam(index, ".content");
      return InvalidParam(param, fmt::format("{}: a text part needs a text field.", param));
    }
    SY_ASSIGN_OR_RETURN(std::string_view piece, ReadMessageString(*part_text, index, ".content"));
    if (!first)
      out->content += '\n';
    out->content += piece;
    first = false;
  }
  return absl::OkStatus();
}

// Reads messages[index] into *message (default-constructed; left partly filled on an error).
absl::Status ReadMessage(element value, size_t index, ChatMessage* message) {
  object message_object;
  if (value.get(message_object) != simdjson::SUCCESS) {
    const std::string param = MessageParam(index);
    return InvalidParam(param, fmt::format("{}: Input should be a valid dictionary.", param));
  }
  internal::FieldReader fields(message_object);
  std::optional<element> role = fields.Get("role");
  if (!role) {
    const std::string param = MessageParam(index, ".role");
    return InvalidParam(param, fmt::format("{}: Field required.", param));
  }
  SY_ASSIGN_OR_RETURN(std::string_view role_name, ReadMessageString(*role, index, ".role"));
  if (std::find(kRoles.begin(), kRoles.end(), role_name) == kRoles.end()) {
    const std::string param = MessageParam(index, ".role");
    return InvalidParam(param, fmt::format("{} must be one of system, developer, user, assistant, "
                                           "tool.",
                                           param));
  }
  message->role = std::string(role_name);
  if (std::optional<element> content = fields.Get("content"))
    SY_RETURN_IF_ERROR(ReadContent(*content, index, message));
  SY_RETURN_IF_ERROR(fields.String("name", &message->name));
  SY_RETURN_IF_ERROR(fields.String("tool_call_id", &message->tool_call_id));
  if (std::optional<element> calls = fields.Get("tool_calls")) {
    if (!calls->is_array()) {
      const std::string param = MessageParam(index, ".tool_calls");
      return InvalidParam(param, fmt::format("{}: Input should be a valid list.", param));
    }
    message->tool_calls = internal::RawJson(*calls);
  }
  SY_RETURN_IF_ERROR(fields.String("reasoning_content", &message->reasoning));
  SY_RETURN_IF_ERROR(fields.String("reasoning", &message->reasoning));
  const bool may_omit_content = message->role == "assistant" && !message->tool_calls.empty();
  if (!message->has_content && !may_omit_content) {
    const std::string param = MessageParam(index, ".content");
    return InvalidParam(param, fmt::format("{}: Field required.", param));
  }
  return absl::OkStatus();
}

absl::Status ReadTemplateKwargs(internal::FieldReader& fields, ChatRequest* out) {
  std::optional<element> value = fields.Get("chat_template_kwargs");
  if (!value)
    return absl::OkStatus();
  object kwargs;
  if (value->get(kwargs) != simdjson::SUCCESS) {
    return InvalidParam("chat_template_kwargs",
                        "chat_template_kwargs: Input should be a valid dictionary.");
  }
  for (auto field : kwargs) {
    if (std::find(kReservedTemplateKwargs.begin(), kReservedTemplateKwargs.end(), field.key) !=
        kReservedTemplateKwargs.end()) {
      continue;
    }
    out->chat_template_kwargs.emplace_back(std::string(field.key), internal::RawJson(field.value));
  }
  return absl::OkStatus();
}

absl::Status ReadChatRequest(RequestBody body, const RequestLimits& limits, ParseScope scope,
                             ChatRequest& request) {
  internal::ParserLease parser;
  internal::FieldReader fields;
  SY_RETURN_IF_ERROR(internal::ParseRequestFields(body, limits.max_body_bytes,
                                                  limits.max_json_depth, parser.get(), &fields));
  if (scope == ParseScope::kServe)
    SY_RETURN_IF_ERROR(fields.String("model", &request.model));
  std::optional<element> messages = fields.Get("messages");
  if (!messages)
    return InvalidParam("messages", "messages: Field required.");
  array message_list;
  if (messages->get(message_list) != simdjson::SUCCESS)
    return InvalidParam("messages", "messages: Input should be a valid list.");
  if (message_list.size() == 0)
    return InvalidParam("messages", "messages must not be empty.");
  if (message_list.size() > limits.max_messages) {
    return InvalidParam("messages",
                        fmt::format("messages may hold at most {} items.", limits.max_messages));
  }
  // Each message is read in its slot: one built apart and moved in costs six string moves.
  request.messages.reserve(message_list.size());
  size_t index = 0;
  for (element value : message_list)
    SY_RETURN_IF_ERROR(ReadMessage(value, index++, &request.messages.emplace_back()));
  SY_RETURN_IF_ERROR(fields.Bool("add_generation_prompt", &request.add_generation_prompt));
  SY_RETURN_IF_ERROR(fields.Bool("continue_final_message", &request.continue_final_message));
  if (request.add_generation_prompt && request.continue_final_message) {
    return InvalidParam("continue_final_message",
                        "Cannot set both `continue_final_message` and `add_generation_prompt` to "
                        "True.");
  }
  SY_RETURN_IF_ERROR(fields.Bool("add_special_tokens", &request.add_special_tokens));
  SY_RETURN_IF_ERROR(fields.String("chat_template", &request.chat_template));
  SY_RETURN_IF_ERROR(ReadTemplateKwargs(fields, &request));
  SY_RETURN_IF_ERROR(ReadToolFields(fields, &request.tools));
  SY_RETURN_IF_ERROR(fields.String("reasoning_effort", &request.reasoning_effort));
  if (scope == ParseScope::kRoute) {
    SY_RETURN_IF_ERROR(ReadRoutingFields(fields, &request.sampling));
    return absl::OkStatus();
  }
  SY_RETURN_IF_ERROR(fields.Bool("logprobs", &request.logprobs));
  std::optional<int64_t> top_logprobs;
  SY_RETURN_IF_ERROR(fields.Int("top_logprobs", INT64_MIN, INT64_MAX, &top_logprobs));
  if (top_logprobs) {
    if (*top_logprobs < 0) {
      return InvalidParam("top_logprobs",
                          fmt::format("top_logprobs must be non-negative, got {}.", *top_logprobs));
    }
    if (*top_logprobs > limits.max_logprobs) {
      return InvalidParam("top_logprobs",
                          fmt::format("Requested sample logprobs of {}, which is greater than max "
                                      "allowed: {}",
                                      *top_logprobs, limits.max_logprobs));
    }
    if (*top_logprobs > 0 && !request.logprobs) {
      return InvalidParam("top_logprobs",
                          "when using `top_logprobs`, `logprobs` must be set to true.");
    }
    request.top_logprobs = static_cast<int>(*top_logprobs);
  }
  SY_RETURN_IF_ERROR(fields.Bool("echo", &request.echo));
  SY_RETURN_IF_ERROR(ReadSamplingFields(fields, limits, false, &request.sampling));
  request.sampling.ignored_fields = fields.UnknownKeys();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatRequest> ParseChatRequest(RequestBody body, const RequestLimits& limits,
                                             ParseScope scope) {
  // Filled in place and returned by one return (no copy): the request is large to move.
  absl::StatusOr<ChatRequest> result(absl::in_place);
  if (absl::Status status = ReadChatRequest(body, limits, scope, *result); !status.ok())
    result = std::move(status);
  return result;
}

}  // namespace switchyard::api
