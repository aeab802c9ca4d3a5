// Request fields shared by /v1/completions and /v1/chat/completions (sampling, streaming,
// routing extras), the limits every request is checked against, and vLLM's validation rules.
// Plain values; any thread may use them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace switchyard::api {

namespace internal {
class FieldReader;
}  // namespace internal

// What a request is parsed for. An engine serving it reads and checks every field
// (kServe). A router choosing where to send it (kRoute) reads only what it routes on: the
// prompt or the messages with what renders them, stream, cache_salt, add_special_tokens (not
// model: the router serves one); the engine it picks checks the rest by its own rules, which
// are not ours when it is vLLM, SGLang or llama.cpp (another max_logprobs, beam search,
// suffix).
enum class ParseScope { kServe, kRoute };

// Server-side bounds. Every client number is checked against one before anything is allocated.
struct RequestLimits {
  size_t max_body_bytes = 4 << 20;  // 413 above this, decided before parsing.
  size_t max_json_depth = 64;
  // Bounds n and best_of. vLLM's VLLM_MAX_N_SEQUENCES is 16384; its docs advise 64-128.
  int max_n = 128;
  int64_t max_tokens = 1 << 20;  // Upper bound of max_tokens before the context-window check.
  int max_logprobs = 20;         // vLLM's default max_logprobs.
  size_t max_stop_strings = 64;
  size_t max_bad_words = 128;  // vLLM's MAX_NUM_BAD_WORDS.
  size_t max_stop_token_ids = 1024;
  size_t max_logit_bias = 1024;
  size_t max_prompts = 1024;  // Entries of a batched completion prompt.
  size_t max_prompt_token_ids = 1 << 20;
  size_t max_messages = 4096;
};

struct StreamOptions {
  bool include_usage = true;  // vLLM's default once stream_options is given.
  bool continuous_usage_stats = false;
};

// OpenAI's response_format (and vLLM's structural_tag type, whose fields stay in `raw`).
struct ResponseFormat {
  std::string type = "text";  // text | json_object | json_schema | structural_tag
  std::string raw;            // The whole object, minified.
  std::string schema;         // json_schema: json_schema.schema, minified.
};

// vLLM's structured_outputs: exactly one constraint is set (checked when parsed).
struct StructuredOutputs {
  std::optional<std::string> json;  // A JSON schema, as JSON text.
  std::optional<std::string> regex;
  std::optional<std::vector<std::string>> choice;
  std::optional<std::string> grammar;
  bool json_object = false;
  std::optional<std::string> structural_tag;
};

struct SamplingRequest {
  std::optional<int64_t> max_tokens;  // max_completion_tokens wins over max_tokens (chat).
  int n = 1;
  // vLLM's (V0) best_of: sequences generated per prompt, of which the n with the highest
  // cumulative logprob are answered, best first. Not on a stream unless equal to n; ignored
  // by beam search (its width is n).
  std::optional<int> best_of;
  std::optional<double> temperature;  // Unset: the model's generation_config default.
  std::optional<double> top_p;
  std::optional<int> top_k;  // 0 or -1 disables.
  std::optional<double> min_p;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> seed;
  int min_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> bad_words;
  std::vector<int32_t> allowed_token_ids;
  std::vector<std::pair<int32_t, double>> logit_bias;  // Token id -> bias in [-100, 100].
  std::optional<int> prompt_logprobs;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  bool include_stop_str_in_output = false;
  std::optional<int> truncate_prompt_tokens;
  bool stream = false;
  std::optional<StreamOptions> stream_options;
  std::optional<ResponseFormat> response_format;
  std::optional<StructuredOutputs> structured_outputs;
  std::string user;
  std::string cache_salt;
  std::string request_id;
  int priority = 0;
  std::string kv_transfer_params;  // Raw JSON object, passed through; empty when absent.
  // vLLM's beam search: n beams, each step extended by their 2n most likely next tokens.
  bool use_beam_search = false;
  double length_penalty = 1.0;  // Beam score = cum_logprob / seq_len^length_penalty.
  // Unknown top-level keys, for a warning log; never forwarded to the engine.
  std::vector<std::string> ignored_fields;

  bool include_usage_in_stream() const {
    return stream && stream_options.has_value() && stream_options->include_usage;
  }
};

// Reads the shared fields from `fields` and checks them (vLLM's SamplingParams rules plus
// `limits`). Errors are InvalidParam naming the field. `allow_zero_max_tokens`: max_tokens
// may be 0 (a completion with echo answers the prompt alone, as vLLM does).
absl::Status ReadSamplingFields(internal::FieldReader& fields, const RequestLimits& limits,
                                bool allow_zero_max_tokens, SamplingRequest* out);

// Reads the two of them a router needs (ParseScope::kRoute): stream and cache_salt.
absl::Status ReadRoutingFields(internal::FieldReader& fields, SamplingRequest* out);

// The max_tokens to run with, given the prompt length: the request's value, or what is left of the
// context window when unset. Over-long prompts and prompt + max_tokens beyond `max_model_len` are
// 400s with vLLM's wording (param "messages" / "prompt" / "max_tokens").
absl::StatusOr<int64_t> ResolveMaxTokens(const SamplingRequest& request, int64_t prompt_tokens,
                                         int64_t max_model_len, std::string_view prompt_param);

}  // namespace switchyard::api
