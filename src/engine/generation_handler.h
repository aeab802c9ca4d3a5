// The generation routes, POST /v1/completions and POST /v1/chat/completions: parse and
// validate (api/), apply the chat template, tokenize, resolve max_tokens against the
// context, submit one EngineRequest per prompt (with n sequences, or best_of of which the n
// best are answered; with use_beam_search, run one beam search per prompt instead:
// internal/beam_search_run.h), and answer: one JSON body when every choice has finished,
// or an SSE stream of chunks ending with the usage chunk (when asked) and `data: [DONE]`.
// A client that goes away aborts its engine requests at once.
//
// Threads: Handle* run on an HTTP loop thread and return without waiting; engine updates
// arrive on the engine loop thread and go to the connection through its thread-safe
// responder. Borrows the context.
#pragma once

#include <memory>

#include "engine/serving_context.h"
#include "net/http_server.h"

namespace switchyard::engine {

void HandleCompletion(const ServingContext& ctx, const net::HttpRequest& request,
                      std::shared_ptr<net::HttpResponder> responder);
void HandleChatCompletion(const ServingContext& ctx, const net::HttpRequest& request,
                          std::shared_ptr<net::HttpResponder> responder);

// Sends the OpenAI error body for `status` with its HTTP status.
void SendError(net::HttpResponder& responder, const absl::Status& status);

}  // namespace switchyard::engine
