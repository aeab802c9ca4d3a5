#include "api/sampling_request.h"

#include <cmath>

#include "fmt/format.h"

#include "api/error.h"
#include "api/internal/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::api {
namespace {

using internal::FieldReader;

constexpr int64_t kInt32Max = INT32_MAX;

absl::Status ReadInt32(FieldReader& fields, std::string_view key, int64_t lo, int64_t hi,
                       std::optional<int>* out) {
  std::optional<int64_t> v;
  SY_RETURN_IF_ERROR(fields.Int(key, lo, hi, &v));
  if (v)
    *out = static_cast<int>(*v);
  return absl::OkStatus();
}

absl::Status ReadLogitBias(FieldReader& fields, const RequestLimits& limits, SamplingRequest* out) {
  std::optional<simdjson::dom::element> value = fields.Get("logit_bias");
  if (!value)
    return absl::OkStatus();
  simdjson::dom::object object;
  if (value->get(object) != simdjson::SUCCESS)
    return InvalidParam("logit_bias", "logit_bias: Input should be a valid dictionary.");
  if (object.size() > limits.max_logit_bias) {
    return InvalidParam("logit_bias", fmt::format("logit_bias may hold at most {} entries.",
                                                  limits.max_logit_bias));
  }
  for (auto field : object) {
    // Keys are token ids written as strings, as OpenAI defines them.
    int64_t id = 0;
    bool ok = !field.key.empty() && field.key.size() <= 10;
    for (char c : field.key) {
      ok = ok && c >= '0' && c <= '9';
      id = ok ? id * 10 + (c - '0') : id;
    }
    if (!ok || id > kInt32Max)
      return InvalidParam("logit_bias", "logit_bias keys must be token ids.");
    SY_ASSIGN_OR_RETURN(double bias, internal::ReadDouble(field.value, "logit_bias"));
    if (bias < -100.0 || bias > 100.0)
      return InvalidParam("logit_bias", "logit_bias values must be in [-100, 100].");
    out->logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  return absl::OkStatus();
}

absl::Status ReadStreamOptions(FieldReader& fields, SamplingRequest* out) {
  std::optional<simdjson::dom::element> value = fields.Get("stream_options");
  if (!value)
    return absl::OkStatus();
  simdjson::dom::object object;
  if (value->get(object) != simdjson::SUCCESS)
    return InvalidParam("stream_options", "stream_options: Input should be a valid dictionary.");
  FieldReader options(object);
  StreamOptions parsed;
  SY_RETURN_IF_ERROR(options.Bool("include_usage", &parsed.include_usage));
  SY_RETURN_IF_ERROR(options.Bool("continuous_usage_stats", &parsed.continuous_usage_stats));
  out->stream_options = parsed;
  return absl::OkStatus();
}

absl::Status ReadResponseFormat(FieldReader& fields, SamplingRequest* out) {
  std::optional<simdjson::dom::element> value = fields.Get("response_format");
  if (!value)
    return absl::OkStatus();
  simdjson::dom::object object;
  if (value->get(object) != simdjson::SUCCESS) {
    return InvalidParam("response_format", "response_format: Input should be a valid dictionary.");
  }
  FieldReader format(object);
  ResponseFormat parsed;
  SY_RETURN_IF_ERROR(format.String("type", &parsed.type));
  if (parsed.type != "text" && parsed.type != "json_object" && parsed.type != "json_schema" &&
      parsed.type != "structural_tag") {
    return InvalidParam("response_format.type",
                        "response_format.type must be one of text, json_object, json_schema, "
                        "structural_tag.");
  }
  if (parsed.type == "json_schema") {
    std::optional<simdjson::dom::element> json_schema = format.Get("json_schema");
    if (!json_schema) {
      return InvalidParam("response_format.json_schema",
                          "response_format.json_schema is required when type is json_schema.");
    }
    simdjson::dom::object spec;
    if (json_schema->get(spec) != simdjson::SUCCESS) {
      return InvalidParam("response_format.json_schema",
                          "response_format.json_schema: Input should be a valid dictionary.");
    }
    simdjson::dom::element schema;
    if (spec["schema"].get(schema) != simdjson::SUCCESS ||
        (!schema.is_object() && !schema.is_bool())) {
      return InvalidParam("response_format.json_schema.schema",
                          "response_format.json_schema.schema must be a JSON schema object.");
    }
    parsed.schema = internal::RawJson(schema);
  }
  parsed.raw = internal::RawJson(*value);
  out->response_format = std::move(parsed);
  return absl::OkStatus();
}

absl::Status ReadStructuredOutputs(FieldReader& fields, const RequestLimits& limits,
                                   SamplingRequest* out) {
  constexpr std::string_view kParam = "structured_outputs";
  std::optional<simdjson::dom::element> value = fields.Get(kParam);
  if (!value)
    return absl::OkStatus();
  simdjson::dom::object object;
  if (value->get(object) != simdjson::SUCCESS)
    return InvalidParam(kParam, "structured_outputs: Input should be a valid dictionary.");
  FieldReader so(object);
  StructuredOutputs parsed;
  int kinds = 0;
  if (std::optional<simdjson::dom::element> json = so.Get("json")) {
    std::string_view text;
    if (json->get(text) == simdjson::SUCCESS) {
      parsed.json = std::string(text);
    } else if (json->is_object() || json->is_bool()) {
      parsed.json = internal::RawJson(*json);
    } else {
      return InvalidParam("structured_outputs.json",
                          "structured_outputs.json must be a JSON schema (object or string).");
    }
    ++kinds;
  }
  std::string text;
  auto read_string = [&](std::string_view key, std::optional<std::string>* field) -> absl::Status {
    if (!so.Get(key))
      return absl::OkStatus();
    text.clear();
    SY_RETURN_IF_ERROR(so.String(key, &text));
    *field = text;
    ++kinds;
    return absl::OkStatus();
  };
  SY_RETURN_IF_ERROR(read_string("regex", &parsed.regex));
  SY_RETURN_IF_ERROR(read_string("grammar", &parsed.grammar));
  SY_RETURN_IF_ERROR(read_string("structural_tag", &parsed.structural_tag));
  if (so.Get("choice")) {
    std::vector<std::string> choices;
    SY_RETURN_IF_ERROR(so.StringOrList("choice", limits.max_prompts, &choices));
    parsed.choice = std::move(choices);
    ++kinds;
  }
  SY_RETURN_IF_ERROR(so.Bool("json_object", &parsed.json_object));
  kinds += parsed.json_object ? 1 : 0;
  // Options that only shape whitespace or pick a backend; our output is compact already.
  bool ignored = false;
  SY_RETURN_IF_ERROR(so.Bool("disable_any_whitespace", &ignored));
  SY_RETURN_IF_ERROR(so.Bool("disable_fallback", &ignored));
  bool no_additional = false;
  SY_RETURN_IF_ERROR(so.Bool("disable_additional_properties", &no_additional));
  if (no_additional) {
    return InvalidParam("structured_outputs.disable_additional_properties",
                        "structured_outputs.disable_additional_properties is not supported.");
  }
  if (so.Get("whitespace_pattern")) {
    return InvalidParam("structured_outputs.whitespace_pattern",
                        "structured_outputs.whitespace_pattern is not supported.");
  }
  if (!so.UnknownKeys().empty()) {
    return InvalidParam(kParam,
                        "structured_outputs takes only json, regex, choice, grammar, json_object, "
                        "structural_tag, disable_any_whitespace, disable_fallback, "
                        "disable_additional_properties and whitespace_pattern.");
  }
  if (kinds != 1) {
    return InvalidParam(kParam, kinds == 0
                                    ? "You must use one kind of structured outputs constraint "
                                      "but none are specified."
                                    : "You can only use one kind of structured outputs "
                                      "constraint but multiple are specified.");
  }
  out->structured_outputs = std::move(parsed);
  return absl::OkStatus();
}

// Beam search asks the engine for the 2n most likely next tokens of every beam, so n is bound
// by max_logprobs as in vLLM; constraints it cannot honour are refused, not ignored.
absl::Status VerifyBeamSearch(const RequestLimits& limits, const SamplingRequest& r) {
  if (!r.use_beam_search)
    return absl::OkStatus();
  if (2 * static_cast<int64_t>(r.n) > limits.max_logprobs) {
    return InvalidParam("n", fmt::format("Beam search takes the 2*n most likely tokens of each "
                                         "beam per step; n must be at most {}, got {}.",
                                         limits.max_logprobs / 2, r.n));
  }
  if (r.structured_outputs ||
      (r.response_format.has_value() && r.response_format->type != "text")) {
    return InvalidParam(r.structured_outputs ? "structured_outputs" : "response_format",
                        "Structured outputs are not supported with beam search.");
  }
  if (r.prompt_logprobs) {
    return InvalidParam("prompt_logprobs", "prompt_logprobs are not supported with beam search.");
  }
  return absl::OkStatus();
}

// best_of as vLLM's V0 SamplingParams checks it (>= n; a stream, whose output kind is
// DELTA there, only with best_of == n), bounded like n. Beam search ignores it.
absl::Status VerifyBestOf(const RequestLimits& limits, const SamplingRequest& r) {
  if (!r.best_of)
    return absl::OkStatus();
  if (*r.best_of < r.n) {
    return InvalidParam("best_of",
                        fmt::format("best_of must be greater than or equal to n, got n={} and "
                                    "best_of={}.",
                                    r.n, *r.best_of));
  }
  if (*r.best_of > limits.max_n) {
    return InvalidParam(
        "best_of", fmt::format("best_of must be at most {}, got {}.", limits.max_n, *r.best_of));
  }
  if (*r.best_of != r.n && r.stream && !r.use_beam_search) {
    return InvalidParam("best_of",
                        fmt::format("best_of results cannot be streamed: best_of must equal n "
                                    "when stream=true, got n={} and best_of={}.",
                                    r.n, *r.best_of));
  }
  return absl::OkStatus();
}

// vLLM's SamplingParams._verify_args, with its messages, plus our fan-out limits.
absl::Status Verify(const RequestLimits& limits, bool allow_zero_max_tokens,
                    const SamplingRequest& r) {
  if (r.n < 1)
    return InvalidParam("n", fmt::format("n must be at least 1, got {}.", r.n));
  if (r.n > limits.max_n)
    return InvalidParam("n", fmt::format("n must be at most {}, got {}.", limits.max_n, r.n));
  SY_RETURN_IF_ERROR(VerifyBestOf(limits, r));
  if (r.presence_penalty < -2.0 || r.presence_penalty > 2.0) {
    return InvalidParam(
        "presence_penalty",
        fmt::format("presence_penalty must be in [-2, 2], got {}.", r.presence_penalty));
  }
  if (r.frequency_penalty < -2.0 || r.frequency_penalty > 2.0) {
    return InvalidParam(
        "frequency_penalty",
        fmt::format("frequency_penalty must be in [-2, 2], got {}.", r.frequency_penalty));
  }
  if (r.repetition_penalty && *r.repetition_penalty <= 0.0) {
    return InvalidParam("repetition_penalty",
                        fmt::format("repetition_penalty must be greater than zero, got {}.",
                                    *r.repetition_penalty));
  }
  if (r.temperature && (*r.temperature < 0.0 || *r.temperature > 2.0)) {
    return InvalidParam("temperature",
                        fmt::format("temperature must be in [0, 2], got {}.", *r.temperature));
  }
  if (r.top_p && (*r.top_p <= 0.0 || *r.top_p > 1.0))
    return InvalidParam("top_p", fmt::format("top_p must be in (0, 1], got {}.", *r.top_p));
  if (r.top_k && *r.top_k < -1) {
    return InvalidParam("top_k",
                        fmt::format("top_k must be 0 (disable), or at least 1, got {}.", *r.top_k));
  }
  if (r.min_p && (*r.min_p < 0.0 || *r.min_p > 1.0))
    return InvalidParam("min_p", fmt::format("min_p must be in [0, 1], got {}.", *r.min_p));
  if (r.max_tokens && *r.max_tokens < (allow_zero_max_tokens ? 0 : 1)) {
    return InvalidParam("max_tokens", fmt::format("max_tokens must be at least {}, got {}.",
                                                  allow_zero_max_tokens ? 0 : 1, *r.max_tokens));
  }
  if (r.max_tokens && *r.max_tokens > limits.max_tokens) {
    return InvalidParam("max_tokens", fmt::format("max_tokens must be at most {}, got {}.",
                                                  limits.max_tokens, *r.max_tokens));
  }
  if (r.max_tokens && r.min_tokens > *r.max_tokens) {
    return InvalidParam("min_tokens",
                        fmt::format("min_tokens must be less than or equal to max_tokens={}, got "
                                    "{}.",
                                    *r.max_tokens, r.min_tokens));
  }
  if (r.prompt_logprobs && *r.prompt_logprobs > limits.max_logprobs) {
    return InvalidParam("prompt_logprobs",
                        fmt::format("Requested prompt logprobs of {}, which is greater than max "
                                    "allowed: {}",
                                    *r.prompt_logprobs, limits.max_logprobs));
  }
  if (r.prompt_logprobs && *r.prompt_logprobs > 0 && r.stream) {
    return InvalidParam("prompt_logprobs",
                        "`prompt_logprobs` are not available when `stream=True`.");
  }
  if (r.stream_options && !r.stream) {
    return InvalidParam("stream_options", "Stream options can only be defined when `stream=True`.");
  }
  return VerifyBeamSearch(limits, r);
}

}  // namespace

absl::Status ReadRoutingFields(FieldReader& fields, SamplingRequest* out) {
  SY_RETURN_IF_ERROR(fields.Bool("stream", &out->stream));
  return fields.String("cache_salt", &out->cache_salt);
}

absl::Status ReadSamplingFields(FieldReader& fields, const RequestLimits& limits,
                                bool allow_zero_max_tokens, SamplingRequest* out) {
  // Wide type bounds first (so a 2^40 never narrows), then vLLM's semantic checks in Verify.
  std::optional<int64_t> max_tokens;
  SY_RETURN_IF_ERROR(fields.Int("max_tokens", INT64_MIN, INT64_MAX, &max_tokens));
  std::optional<int64_t> max_completion_tokens;
  SY_RETURN_IF_ERROR(
      fields.Int("max_completion_tokens", INT64_MIN, INT64_MAX, &max_completion_tokens));
  if (max_completion_tokens && *max_completion_tokens < 1) {
    return InvalidParam(
        "max_completion_tokens",
        fmt::format("max_completion_tokens must be at least 1, got {}.", *max_completion_tokens));
  }
  out->max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  std::optional<int> n;
  SY_RETURN_IF_ERROR(ReadInt32(fields, "n", INT32_MIN, kInt32Max, &n));
  out->n = n.value_or(1);
  SY_RETURN_IF_ERROR(ReadInt32(fields, "best_of", 1, kInt32Max, &out->best_of));
  SY_RETURN_IF_ERROR(fields.Double("temperature", &out->temperature));
  SY_RETURN_IF_ERROR(fields.Double("top_p", &out->top_p));
  SY_RETURN_IF_ERROR(ReadInt32(fields, "top_k", INT32_MIN, kInt32Max, &out->top_k));
  SY_RETURN_IF_ERROR(fields.Double("min_p", &out->min_p));
  std::optional<double> presence, frequency;
  SY_RETURN_IF_ERROR(fields.Double("presence_penalty", &presence));
  SY_RETURN_IF_ERROR(fields.Double("frequency_penalty", &frequency));
  out->presence_penalty = presence.value_or(0.0);
  out->frequency_penalty = frequency.value_or(0.0);
  SY_RETURN_IF_ERROR(fields.Double("repetition_penalty", &out->repetition_penalty));
  SY_RETURN_IF_ERROR(fields.Int("seed", INT64_MIN, INT64_MAX, &out->seed));
  std::optional<int> min_tokens;
  SY_RETURN_IF_ERROR(ReadInt32(fields, "min_tokens", 0, kInt32Max, &min_tokens));
  out->min_tokens = min_tokens.value_or(0);
  SY_RETURN_IF_ERROR(fields.StringOrList("stop", limits.max_stop_strings, &out->stop));
  SY_RETURN_IF_ERROR(
      fields.TokenIds("stop_token_ids", limits.max_stop_token_ids, &out->stop_token_ids));
  SY_RETURN_IF_ERROR(
      fields.TokenIds("allowed_token_ids", limits.max_prompt_token_ids, &out->allowed_token_ids));
  SY_RETURN_IF_ERROR(ReadLogitBias(fields, limits, out));
  SY_RETURN_IF_ERROR(ReadInt32(fields, "prompt_logprobs", 0, kInt32Max, &out->prompt_logprobs));
  SY_RETURN_IF_ERROR(fields.Bool("ignore_eos", &out->ignore_eos));
  SY_RETURN_IF_ERROR(fields.Bool("skip_special_tokens", &out->skip_special_tokens));
  SY_RETURN_IF_ERROR(
      fields.Bool("spaces_between_special_tokens", &out->spaces_between_special_tokens));
  SY_RETURN_IF_ERROR(fields.Bool("include_stop_str_in_output", &out->include_stop_str_in_output));
  SY_RETURN_IF_ERROR(
      ReadInt32(fields, "truncate_prompt_tokens", -1, kInt32Max, &out->truncate_prompt_tokens));
  SY_RETURN_IF_ERROR(ReadRoutingFields(fields, out));
  SY_RETURN_IF_ERROR(ReadStreamOptions(fields, out));
  SY_RETURN_IF_ERROR(ReadResponseFormat(fields, out));
  SY_RETURN_IF_ERROR(ReadStructuredOutputs(fields, limits, out));
  SY_RETURN_IF_ERROR(fields.String("user", &out->user));
  SY_RETURN_IF_ERROR(fields.String("request_id", &out->request_id));
  std::optional<int> priority;
  SY_RETURN_IF_ERROR(ReadInt32(fields, "priority", INT32_MIN, kInt32Max, &priority));
  out->priority = priority.value_or(0);
  if (std::optional<simdjson::dom::element> kv = fields.Get("kv_transfer_params")) {
    if (!kv->is_object()) {
      return InvalidParam("kv_transfer_params",
                          "kv_transfer_params: Input should be a valid dictionary.");
    }
    out->kv_transfer_params = internal::RawJson(*kv);
  }
  SY_RETURN_IF_ERROR(fields.Bool("use_beam_search", &out->use_beam_search));
  std::optional<double> length_penalty;
  SY_RETURN_IF_ERROR(fields.Double("length_penalty", &length_penalty));
  out->length_penalty = length_penalty.value_or(1.0);
  SY_RETURN_IF_ERROR(fields.StringOrList("bad_words", limits.max_bad_words, &out->bad_words));
  return Verify(limits, allow_zero_max_tokens, *out);
}

absl::StatusOr<int64_t> ResolveMaxTokens(const SamplingRequest& request, int64_t prompt_tokens,
                                         int64_t max_model_len, std::string_view prompt_param) {
  if (prompt_tokens >= max_model_len) {
    return InvalidParam(prompt_param,
                        fmt::format("This model's maximum context length is {} tokens. However, "
                                    "your request has {} input tokens. Please reduce the length "
                                    "of the input messages.",
                                    max_model_len, prompt_tokens));
  }
  if (!request.max_tokens)
    return max_model_len - prompt_tokens;
  if (*request.max_tokens > max_model_len - prompt_tokens) {
    return InvalidParam(
        "max_tokens",
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                    "output tokens and your prompt contains at least {} input tokens, for a "
                    "total of at least {} tokens.",
                    max_model_len, *request.max_tokens, prompt_tokens,
                    *request.max_tokens + prompt_tokens));
  }
  return *request.max_tokens;
}

}  // namespace switchyard::api
