// PromptTokenizer: a generation request's prompt in the tokens the engines will see, for
// prefix-aware scheduling, with the engines' own tokenizer and chat template:
//   /v1/chat/completions  the messages rendered through the request's chat_template, else the
//                         model's (text/chat_prompt.h), encoded with the request's
//                         add_special_tokens (false unless it says so, as vLLM's chat path)
//   /v1/completions       the first prompt (a batch is scheduled by its first): its token ids
//                         as given, or its text encoded (add_special_tokens true by default)
// The body is read as a router reads it (api::ParseScope::kRoute): the routing fields only;
// the engine picked checks the rest by its own rules. Without a tokenizer a text prompt or
// chat has no tokens (the request is routed without them); with a tokenizer but no template,
// a chat request must bring its own, as at an engine.
//
// Immutable after FromConfig; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "api/request_body.h"
#include "router/router_config.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace switchyard::router {

// What the router reads of a generation request's body.
struct TokenizedRequest {
  std::vector<int32_t> prompt_tokens;  // empty: unknown (no tokenizer) or an empty prompt
  bool stream = false;
  std::string cache_salt;
  std::optional<int64_t> max_tokens;  // max_completion_tokens, else max_tokens, when given
};

class PromptTokenizer {
 public:
  // From `config`: built_tokenizer (with built_chat_template) when set; else the Hugging Face
  // directory `tokenizer` (its tokenizer.json, and its chat template when it has one, else
  // built_chat_template); else none. Errors: the directory's tokenizer.json or the template
  // does not load.
  static absl::StatusOr<std::unique_ptr<PromptTokenizer>> FromConfig(const RouterConfig& config);

  // `chat`: the body is a chat completion request, else a completion request. Errors are the
  // parser's (InvalidArgument naming the field) and the chat template's.
  absl::StatusOr<TokenizedRequest> Tokenize(api::RequestBody body, bool chat) const;

 private:
  PromptTokenizer() = default;

  std::shared_ptr<const text::Tokenizer> tokenizer_;  // null: none
  // The model's template and its special tokens; null without a tokenizer or a template.
  std::unique_ptr<text::ChatTemplate> chat_template_;
  text::ModelChatTemplate special_;
};

}  // namespace switchyard::router
