// POST /v1/completions request: parsed from the JSON body into typed fields and validated the
// way vLLM validates it. Plain values; any thread may parse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "api/request_body.h"
#include "api/sampling_request.h"

namespace switchyard::api {

// One prompt: text to tokenize, or token ids given by the client.
struct Prompt {
  std::string text;
  std::vector<int32_t> token_ids;
  bool is_tokens = false;

  bool operator==(const Prompt&) const = default;
};

struct CompletionRequest {
  std::string model;            // Empty: the served model. Not read by kRoute.
  std::vector<Prompt> prompts;  // A batch; each prompt yields n choices.
  std::optional<int> logprobs;  // Top-k alternatives per token, <= limits.max_logprobs.
  // Each choice starts with its prompt (with logprobs: the prompt tokens' logprobs first).
  // max_tokens may then be 0: the choices hold the prompt alone (vLLM runs one token).
  bool echo = false;
  bool add_special_tokens = true;
  SamplingRequest sampling;
};

// Parses and validates `body`, every field or (kRoute) those a router reads. Errors: 413
// (body over limits.max_body_bytes), 400 with `param` for malformed JSON, wrong types and
// out-of-range values, 501 for unsupported features.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(RequestBody body,
                                                         const RequestLimits& limits,
                                                         ParseScope scope = ParseScope::kServe);

}  // namespace switchyard::api
