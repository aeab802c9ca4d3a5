#include "api/completion_request.h"

#include "absl/utility/utility.h"
#include "fmt/format.h"

#include "api/error.h"
#include "api/internal/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::api {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;

constexpr std::string_view kPromptTypes =
    "prompt: Input should be a string, a list of strings, a list of token ids or a list of "
    "lists of token ids.";

absl::StatusOr<Prompt> ReadTokenPrompt(array ids, const RequestLimits& limits) {
  if (ids.size() > limits.max_prompt_token_ids) {
    return InvalidParam("prompt", fmt::format("prompt may hold at most {} token ids.",
                                              limits.max_prompt_token_ids));
  }
  Prompt prompt;
  prompt.is_tokens = true;
  for (element id : ids) {
    SY_ASSIGN_OR_RETURN(int32_t token, internal::ReadTokenId(id, "prompt"));
    prompt.token_ids.push_back(token);
  }
  return prompt;
}

absl::Status ReadPrompts(element value, const RequestLimits& limits, std::vector<Prompt>* out) {
  std::string_view text;
  if (value.get(text) == simdjson::SUCCESS) {
    out->push_back(Prompt{std::string(text), {}, false});
  } else {
    array items;
    if (value.get(items) != simdjson::SUCCESS)
      return InvalidParam("prompt", std::string(kPromptTypes));
    if (items.size() == 0)
      return InvalidParam("prompt", "Prompt cannot be empty.");
    element first = items.at(0).value_unsafe();
    if (first.is_int64() || first.is_uint64() || first.is_double()) {
      SY_ASSIGN_OR_RETURN(Prompt prompt, ReadTokenPrompt(items, limits));
      out->push_back(std::move(prompt));
    } else {
      if (items.size() > limits.max_prompts) {
        return InvalidParam("prompt",
                            fmt::format("prompt may hold at most {} prompts.", limits.max_prompts));
      }
      const bool strings = first.is_string();
      for (element item : items) {
        array ids;
        if (strings && item.get(text) == simdjson::SUCCESS) {
          out->push_back(Prompt{std::string(text), {}, false});
        } else if (!strings && item.get(ids) == simdjson::SUCCESS) {
          SY_ASSIGN_OR_RETURN(Prompt prompt, ReadTokenPrompt(ids, limits));
          out->push_back(std::move(prompt));
        } else {
          return InvalidParam("prompt", std::string(kPromptTypes));
        }
      }
    }
  }
  // CVE-2024-8768: an empty prompt crashed vLLM's server; it is a 400 now.
  for (const Prompt& prompt : *out) {
    if (prompt.is_tokens ? prompt.token_ids.empty() : prompt.text.empty())
      return InvalidParam("prompt", "Prompt cannot be empty.");
  }
  return absl::OkStatus();
}

absl::Status ReadCompletionRequest(RequestBody body, const RequestLimits& limits, ParseScope scope,
                                   CompletionRequest& request) {
  internal::ParserLease parser;
  internal::FieldReader fields;
  SY_RETURN_IF_ERROR(internal::ParseRequestFields(body, limits.max_body_bytes,
                                                  limits.max_json_depth, parser.get(), &fields));
  if (scope == ParseScope::kServe)
    SY_RETURN_IF_ERROR(fields.String("model", &request.model));
  std::optional<element> prompt = fields.Get("prompt");
  if (!prompt)
    return InvalidParam("prompt", "prompt: Field required.");
  SY_RETURN_IF_ERROR(ReadPrompts(*prompt, limits, &request.prompts));
  SY_RETURN_IF_ERROR(fields.Bool("add_special_tokens", &request.add_special_tokens));
  if (scope == ParseScope::kRoute) {
    SY_RETURN_IF_ERROR(ReadRoutingFields(fields, &request.sampling));
    return absl::OkStatus();
  }
  std::optional<int64_t> logprobs;
  SY_RETURN_IF_ERROR(fields.Int("logprobs", INT64_MIN, INT64_MAX, &logprobs));
  if (logprobs) {
    if (*logprobs < 0) {
      return InvalidParam("logprobs",
                          fmt::format("logprobs must be non-negative, got {}.", *logprobs));
    }
    if (*logprobs > limits.max_logprobs) {
      return InvalidParam("logprobs",
                          fmt::format("Requested sample logprobs of {}, which is greater than max "
                                      "allowed: {}",
                                      *logprobs, limits.max_logprobs));
    }
    request.logprobs = static_cast<int>(*logprobs);
  }
  SY_RETURN_IF_ERROR(fields.Bool("echo", &request.echo));
  std::string suffix;
  SY_RETURN_IF_ERROR(fields.String("suffix", &suffix));
  if (!suffix.empty())
    return InvalidParam("suffix", "suffix is not currently supported");
  SY_RETURN_IF_ERROR(ReadSamplingFields(fields, limits, request.echo, &request.sampling));
  // The echoed prompt's logprobs are prompt logprobs, which beam search does not compute.
  if (request.echo && request.logprobs && request.sampling.use_beam_search) {
    return InvalidParam("echo", "echo with logprobs is not supported with beam search.");
  }
  request.sampling.ignored_fields = fields.UnknownKeys();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(RequestBody body,
                                                         const RequestLimits& limits,
                                                         ParseScope scope) {
  // Filled in place and returned by one return (no copy): the request is large to move.
  absl::StatusOr<CompletionRequest> result(absl::in_place);
  if (absl::Status status = ReadCompletionRequest(body, limits, scope, *result); !status.ok())
    result = std::move(status);
  return result;
}

}  // namespace switchyard::api
