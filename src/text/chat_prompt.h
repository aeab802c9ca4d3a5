// RenderChatPrompt: an OpenAI chat request's messages through the model's chat template, to
// the prompt text the engines (and the router, to know the prompt's tokens) tokenize, the way
// vLLM's chat path (transformers' apply_chat_template) builds it: messages as JSON objects, tools,
// add_generation_prompt, the checkpoint's special tokens and the request's chat_template_kwargs.
// With continue_final_message the output ends right after the last message's content, so the model
// continues it.
//
// Stateless; any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"

#include "api/chat_request.h"
#include "text/chat_template.h"

namespace switchyard::text {

// Renders with the request's chat_template when it has one, else `model_template` (null
// when the checkpoint has none); `special` holds the checkpoint's special tokens.
// Errors (InvalidArgument): no template at all, the template's own (syntax,
// raise_exception, budgets, type errors), continue_final_message with the last message
// missing from the output.
absl::StatusOr<std::string> RenderChatPrompt(const api::ChatRequest& request,
                                             const ChatTemplate* model_template,
                                             const ModelChatTemplate& special);

}  // namespace switchyard::text
