#include "router/prompt_tokenizer.h"

#include <filesystem>
#include <optional>
#include <utility>

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "base/status_macros.h"
#include "text/chat_prompt.h"

namespace switchyard::router {

absl::StatusOr<std::unique_ptr<PromptTokenizer>> PromptTokenizer::FromConfig(
    const RouterConfig& config) {
  std::unique_ptr<PromptTokenizer> out(new PromptTokenizer());
  std::optional<text::ModelChatTemplate> tmpl = config.built_chat_template;
  if (config.built_tokenizer != nullptr) {
    out->tokenizer_ = config.built_tokenizer;
  } else if (!config.tokenizer.empty()) {
    const std::filesystem::path dir(config.tokenizer);
    SY_ASSIGN_OR_RETURN(out->tokenizer_,
                        text::Tokenizer::FromJsonFile((dir / "tokenizer.json").string()));
    if (absl::StatusOr<text::ModelChatTemplate> t = text::LoadModelChatTemplate(dir.string());
        t.ok()) {
      tmpl = *std::move(t);
    }
  }
  if (out->tokenizer_ != nullptr && tmpl.has_value()) {
    out->special_ = *tmpl;
    SY_ASSIGN_OR_RETURN(out->chat_template_, text::ChatTemplate::Compile(tmpl->source));
  }
  return out;
}

absl::StatusOr<TokenizedRequest> PromptTokenizer::Tokenize(api::RequestBody body, bool chat) const {
  const api::RequestLimits limits;
  TokenizedRequest out;
  if (chat) {
    // Read in place: a ChatRequest is large to move out of its StatusOr.
    absl::StatusOr<api::ChatRequest> req =
        api::ParseChatRequest(body, limits, api::ParseScope::kRoute);
    if (!req.ok())
      return req.status();
    out.stream = req->sampling.stream;
    out.cache_salt = std::move(req->sampling.cache_salt);
    out.max_tokens = req->sampling.max_tokens;
    if (tokenizer_ == nullptr)
      return out;
    SY_ASSIGN_OR_RETURN(std::string prompt,
                        text::RenderChatPrompt(*req, chat_template_.get(), special_));
    SY_ASSIGN_OR_RETURN(out.prompt_tokens, tokenizer_->Encode(prompt, req->add_special_tokens));
    return out;
  }
  absl::StatusOr<api::CompletionRequest> req =
      api::ParseCompletionRequest(body, limits, api::ParseScope::kRoute);
  if (!req.ok())
    return req.status();
  out.stream = req->sampling.stream;
  out.cache_salt = std::move(req->sampling.cache_salt);
  out.max_tokens = req->sampling.max_tokens;
  if (req->prompts.empty())
    return out;
  if (req->prompts[0].is_tokens) {
    out.prompt_tokens = std::move(req->prompts[0].token_ids);
  } else if (tokenizer_ != nullptr) {
    SY_ASSIGN_OR_RETURN(out.prompt_tokens,
                        tokenizer_->Encode(req->prompts[0].text, req->add_special_tokens));
  }
  return out;
}

}  // namespace switchyard::router
