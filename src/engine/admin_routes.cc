#include "engine/admin_routes.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"

#include "api/chat_request.h"
#include "api/error.h"
#include "api/response_writer.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "engine/generation_handler.h"
#include "engine/startup_report.h"
#include "kvx/kv_events.h"
#include "net/query_string.h"
#include "text/chat_prompt.h"

namespace switchyard::engine {
namespace {

constexpr std::string_view kJson = "application/json";

// True when the body is a JSON object with a "messages" key (vLLM's chat form of
// /tokenize); parse errors are left to the parsers, which report them properly.
bool HasMessages(std::string_view body) {
  absl::StatusOr<std::unique_ptr<base::JsonDocument>> doc =
      base::JsonDocument::Parse(body, "request");
  if (!doc.ok())
    return false;
  simdjson::dom::object root;
  if ((*doc)->root().get_object().get(root) != simdjson::SUCCESS)
    return false;
  simdjson::dom::element messages;
  return root["messages"].get(messages) == simdjson::SUCCESS;
}

absl::StatusOr<std::vector<int32_t>> TokenizeChat(const ServingContext& ctx,
                                                  std::string_view body) {
  SY_ASSIGN_OR_RETURN(api::ChatRequest req, api::ParseChatRequest(body, ctx.limits));
  SY_RETURN_IF_ERROR(CheckServedModel(ctx, req.model));
  SY_ASSIGN_OR_RETURN(std::string prompt,
                      text::RenderChatPrompt(req, ctx.chat_template, ctx.chat_special_tokens));
  return ctx.tokenizer->Encode(prompt, req.add_special_tokens);
}

absl::StatusOr<std::string> Tokenize(const ServingContext& ctx, std::string_view body) {
  std::vector<int32_t> ids;
  bool want_strs = false;
  if (HasMessages(body)) {
    SY_ASSIGN_OR_RETURN(ids, TokenizeChat(ctx, body));
  } else {
    SY_ASSIGN_OR_RETURN(api::TokenizeRequest req, api::ParseTokenizeRequest(body, ctx.limits));
    SY_RETURN_IF_ERROR(CheckServedModel(ctx, req.model));
    SY_ASSIGN_OR_RETURN(ids, ctx.tokenizer->Encode(req.prompt, req.add_special_tokens));
    want_strs = req.return_token_strs;
  }
  std::vector<std::string> strs;
  if (want_strs) {
    for (int32_t id : ids)
      strs.emplace_back(ctx.tokenizer->IdToToken(id));
  }
  return api::TokenizeResponse(ids, ctx.max_model_len, want_strs ? &strs : nullptr);
}

absl::StatusOr<std::string> Detokenize(const ServingContext& ctx, std::string_view body) {
  SY_ASSIGN_OR_RETURN(api::DetokenizeRequest req, api::ParseDetokenizeRequest(body, ctx.limits));
  SY_RETURN_IF_ERROR(CheckServedModel(ctx, req.model));
  const auto vocab = static_cast<int64_t>(ctx.tokenizer->vocab_size());
  for (size_t i = 0; i < req.tokens.size(); ++i) {
    if (req.tokens[i] < 0 || req.tokens[i] >= vocab) {
      return api::InvalidParam(
          "tokens", fmt::format("token id {} at index {} is outside the vocabulary [0, {})",
                                req.tokens[i], i, vocab));
    }
  }
  return api::DetokenizeResponse(ctx.tokenizer->Decode(req.tokens, false));
}

// Whether the reset may preempt running requests, from the query.
absl::StatusOr<bool> ResetRunningRequests(std::string_view query) {
  SY_ASSIGN_OR_RETURN(net::QueryParams params, net::ParseQueryString(query));
  bool reset_running = false;
  for (const auto& [name, value] : params) {
    if (name != "reset_running_requests" && name != "reset_external")
      continue;
    std::optional<bool> flag = net::ParseQueryBool(value);
    if (!flag.has_value())
      return api::InvalidParam(name, fmt::format("{} must be true or false", name));
    if (name == "reset_running_requests")
      reset_running = *flag;
  }
  return reset_running;
}

void Answer(net::HttpResponder& responder, absl::StatusOr<std::string> body) {
  if (!body.ok()) {
    SendError(responder, body.status());
    return;
  }
  responder.Send(200, kJson, *std::move(body));
}

}  // namespace

void HandleModels(const ServingContext& ctx, const net::HttpRequest&,
                  std::shared_ptr<net::HttpResponder> responder) {
  api::ModelCard card;
  card.id = ctx.served_model_name;
  card.created = ctx.created;
  card.root = ctx.model_root;
  card.max_model_len = ctx.max_model_len;
  responder->Send(200, kJson, api::ModelList({card}));
}

void HandleTokenize(const ServingContext& ctx, const net::HttpRequest& request,
                    std::shared_ptr<net::HttpResponder> responder) {
  Answer(*responder, Tokenize(ctx, request.body));
}

void HandleDetokenize(const ServingContext& ctx, const net::HttpRequest& request,
                      std::shared_ptr<net::HttpResponder> responder) {
  Answer(*responder, Detokenize(ctx, request.body));
}

void HandleHealth(const ServingContext& ctx, const net::HttpRequest&,
                  std::shared_ptr<net::HttpResponder> responder) {
  // Draining: not ready, so that routers and load balancers stop sending.
  if (ctx.drain != nullptr && ctx.drain->draining()) {
    responder->Send(503, kJson, "", {{"retry-after", "1"}, {"connection", "close"}});
    return;
  }
  responder->Send(200, kJson, "");
}

void HandleVersion(const ServingContext& ctx, const net::HttpRequest&,
                   std::shared_ptr<net::HttpResponder> responder) {
  std::string body = "{\"version\":";
  base::AppendJsonString(ctx.version, false, &body);
  body.push_back('}');
  responder->Send(200, kJson, std::move(body));
}

void HandleMetrics(const ServingContext& ctx, const net::HttpRequest&,
                   std::shared_ptr<net::HttpResponder> responder) {
  responder->Send(200, "text/plain; version=0.0.4; charset=utf-8",
                  ctx.metrics != nullptr ? ctx.metrics->Serialize() : std::string());
}

void HandleDebugKv(const ServingContext& ctx, const net::HttpRequest&,
                   std::shared_ptr<net::HttpResponder> responder) {
  const EngineSnapshot s = ctx.engine->snapshot();
  auto rate = [](int64_t hits, int64_t queries) {
    return queries > 0 ? static_cast<double>(hits) / static_cast<double>(queries) : 0.0;
  };
  std::string body = fmt::format(
      "{{\"tiers\":[{{\"medium\":\"{}\",\"capacity_blocks\":{},\"used_blocks\":{},"
      "\"hit_rate\":{}}}",
      kvx::kMediumGpu, s.num_blocks, s.num_blocks - s.num_free_blocks,
      rate(s.prefix_cache_hits, s.prefix_cache_queries));
  for (const KvTierStats& t : s.kv_tiers) {
    fmt::format_to(std::back_inserter(body),
                   ",{{\"medium\":\"{}\",\"capacity_blocks\":{},\"used_blocks\":{},"
                   "\"hit_rate\":{},\"block_bytes\":{},\"stored_blocks\":{},"
                   "\"evicted_blocks\":{},\"loads\":{},\"failed_loads\":{}}}",
                   t.medium, t.capacity_blocks, t.used_blocks, rate(t.hit_tokens, t.query_tokens),
                   t.block_bytes, t.stored_blocks, t.evicted_blocks, t.loads_done, t.loads_failed);
  }
  body += "]}";
  responder->Send(200, kJson, std::move(body));
}

void HandleDebugStartup(const ServingContext& ctx, const net::HttpRequest&,
                        std::shared_ptr<net::HttpResponder> responder) {
  responder->Send(200, kJson,
                  StartupReportJson(ctx.startup, ctx.runner_limits, ctx.engine->snapshot()));
}

void HandleResetPrefixCache(const ServingContext& ctx, const net::HttpRequest& request,
                            std::shared_ptr<net::HttpResponder> responder) {
  absl::StatusOr<bool> reset_running = ResetRunningRequests(request.query);
  if (!reset_running.ok()) {
    SendError(*responder, reset_running.status());
    return;
  }
  ctx.engine->ResetPrefixCache(*reset_running, [responder](absl::Status status) {
    if (!status.ok()) {
      // vLLM answers 409 when active requests keep the cache from being reset.
      SendError(*responder, absl::IsFailedPrecondition(status)
                                ? api::WithHttpStatus(std::move(status), 409)
                                : std::move(status));
      return;
    }
    responder->Send(200, kJson, "");
  });
}

}  // namespace switchyard::engine
