// JSON writers for OpenAI-compatible responses (completion, chat.completion, streaming chunks,
// /v1/models, /tokenize, /detokenize) and the SSE framing; plus parsing of the small tokenize /
// detokenize bodies. Pure functions over plain structs: no clock, no randomness inside (ids and
// `created` are passed in). Any thread may call them. All text goes through
// base::AppendJsonString, so invalid UTF-8 from a model becomes U+FFFD, never a throw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "api/sampling_request.h"
#include "api/tool_parser.h"

namespace switchyard::api {

// "cmpl-<32 hex>" / "chatcmpl-<32 hex>" from 128 random bits supplied by the caller.
std::string CompletionId(uint64_t hi, uint64_t lo);
std::string ChatCompletionId(uint64_t hi, uint64_t lo);
// A tool call's id from 128 random bits: vLLM's "chatcmpl-tool-<32 hex>", or (kMistral) the
// 9 alphanumerics Mistral's tokenizer demands.
std::string ToolCallId(ToolCallIdKind kind, uint64_t hi, uint64_t lo);

// The length of `text` as a completion's logprobs.text_offset counts it: in characters
// (code points; an invalid byte sequence counts as the one U+FFFD it is written as), which is
// what vLLM's Python len() counts, not bytes.
size_t TextOffsetLength(std::string_view text);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<int64_t> cached_tokens;  // Written as prompt_tokens_details.cached_tokens.
};

struct TopLogprob {
  std::string token;
  double logprob = 0.0;
};

// One sampled (or echoed prompt) token with its logprob and the top alternatives.
struct TokenLogprob {
  std::string token;
  // None for the first prompt token of an echo, which has no logprob: its token_logprobs
  // and top_logprobs entries are written as null.
  std::optional<double> logprob = 0.0;
  std::vector<TopLogprob> top;
};

// One token of a prompt position in vLLM's prompt_logprobs.
struct PromptLogprobEntry {
  int32_t token_id = 0;
  double logprob = 0.0;
  int64_t rank = 0;
  std::string decoded_token;
};

// vLLM's prompt_logprobs: one entry per prompt position after the first, each the prompt
// token followed by the top alternatives (no id twice). Written as a list whose first item
// is null (the first prompt token has no logprob), then one object per position:
// {"<token id>": {"logprob": f, "rank": n, "decoded_token": s}, ...} in the given order.
using PromptLogprobs = std::vector<std::vector<PromptLogprobEntry>>;

// The completions-format logprobs of an echoed prompt, as vLLM builds them from the
// prompt logprobs: `first_token` with no logprob, then each position's prompt token with
// its logprob and, as its top alternatives, the first top_n + 1 entries of the position
// (the prompt token, then the most likely ids).
// REQUIRES: every position holds its prompt token first (as PromptLogprobs does).
std::vector<TokenLogprob> EchoedPromptLogprobs(std::string_view first_token,
                                               const PromptLogprobs& positions, int top_n);

struct CompletionChoice {
  int index = 0;
  std::string text;
  // Completions format: tokens, token_logprobs, top_logprobs (dicts), text_offset.
  std::optional<std::vector<TokenLogprob>> logprobs;
  size_t text_offset_base = 0;  // Offset of `text` in the full output, in characters.
  std::string finish_reason;    // Empty: null (still generating).
  std::string stop_reason;      // Matched stop string; empty: null.
  std::optional<PromptLogprobs> prompt_logprobs;  // Written only when set.
};

// A tool call of a chat message, or (streaming) one delta of it: a delta with an id is the
// call's first (id, type, name and the first arguments), one without carries arguments only.
struct ChatToolCall {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatChoice {
  int index = 0;
  std::string content;
  bool content_null = false;  // Written as null (tool calls and nothing else).
  std::string reasoning;      // Empty: omitted.
  std::vector<ChatToolCall> tool_calls;
  // Chat format: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
  std::optional<std::vector<TokenLogprob>> logprobs;
  std::string finish_reason;
};

struct ResponseHeader {
  std::string id;
  int64_t created = 0;  // Unix seconds.
  std::string model;
};

std::string CompletionResponse(const ResponseHeader& header,
                               const std::vector<CompletionChoice>& choices, const Usage& usage,
                               std::string_view kv_transfer_params = {});
// `prompt_logprobs`, when non-null, is written as the top-level field vLLM's chat has.
std::string ChatCompletionResponse(const ResponseHeader& header,
                                   const std::vector<ChatChoice>& choices, const Usage& usage,
                                   std::string_view kv_transfer_params = {},
                                   const PromptLogprobs* prompt_logprobs = nullptr);

// Streaming: one chunk per call, already SSE-framed. A non-null `usage` is written on the
// chunk (stream_options.continuous_usage_stats).
std::string CompletionChunk(const ResponseHeader& header, const CompletionChoice& choice,
                            const Usage* usage = nullptr);
// `with_role` adds "role":"assistant" to the delta (first chunk of each choice).
std::string ChatCompletionChunk(const ResponseHeader& header, const ChatChoice& choice,
                                bool with_role, const Usage* usage = nullptr);
// Final usage chunk (choices: []), sent when stream_options.include_usage.
std::string CompletionUsageChunk(const ResponseHeader& header, const Usage& usage);
std::string ChatUsageChunk(const ResponseHeader& header, const Usage& usage);

// SSE framing.
std::string SseData(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// A mid-stream failure after HTTP 200: the error body as one data event (then [DONE]).
std::string SseError(const absl::Status& status);

struct ModelCard {
  std::string id;
  int64_t created = 0;
  std::string root;  // Where the weights came from; defaults to id when empty.
  int64_t max_model_len = 0;
  std::string owned_by = "switchyard";
};
std::string ModelList(const std::vector<ModelCard>& models);

// POST /tokenize: {model?, prompt, add_special_tokens=true, return_token_strs=false}.
// (The chat form with messages is answered by the chat parser and the template renderer.)
struct TokenizeRequest {
  std::string model;
  std::string prompt;
  bool add_special_tokens = true;
  bool return_token_strs = false;
};
absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body,
                                                     const RequestLimits& limits);
// `token_strs` is written only when non-null.
std::string TokenizeResponse(const std::vector<int32_t>& tokens, int64_t max_model_len,
                             const std::vector<std::string>* token_strs);

// POST /detokenize: {model?, tokens: [ids]} -> {"prompt": text}.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
absl::StatusOr<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body,
                                                         const RequestLimits& limits);
std::string DetokenizeResponse(std::string_view text);

}  // namespace switchyard::api
