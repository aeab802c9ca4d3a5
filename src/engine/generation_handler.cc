#include "engine/generation_handler.h"

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fmt/format.h"

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/error.h"
#include "base/status_macros.h"
#include "engine/bad_words.h"
#include "engine/beam_search.h"
#include "engine/internal/beam_search_run.h"
#include "engine/internal/generation_stream.h"
#include "kvx/kv_transfer_params.h"
#include "net/host_port.h"
#include "structured/grammar_cache.h"
#include "structured/request_grammar.h"
#include "text/chat_prompt.h"

namespace switchyard::engine {
namespace {

// OpenAI's (and vLLM's) default max_tokens for /v1/completions.
constexpr int64_t kCompletionDefaultMaxTokens = 16;

std::pair<uint64_t, uint64_t> Random128() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return {rng(), rng()};
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What every prompt of one HTTP request shares.
struct Submission {
  std::vector<EngineRequest> requests;
  internal::GenerationStreamOptions stream;
  // use_beam_search: each request's n is its beam width.
  bool beam_search = false;
  double length_penalty = 1.0;
  // The drain's hold on this request (null without a gate).
  base::DrainGate::Ticket ticket;
};

// The unsupported request features, refused rather than ignored.
absl::Status CheckSupported(const ServingContext& ctx, const api::SamplingRequest& s) {
  if (s.priority != 0 && !ctx.priority_scheduling) {
    return api::InvalidParam("priority",
                             "Priority scheduling is not enabled (start the engine with "
                             "--scheduling-policy priority).");
  }
  return absl::OkStatus();
}

// vLLM's best_of outside beam search (whose width is n): the sequences generated per prompt
// when their best n are answered. A stream has best_of == n and answers them as they come.
std::optional<int32_t> RankedBestOf(const api::SamplingRequest& s) {
  if (!s.best_of.has_value() || s.use_beam_search || s.stream)
    return std::nullopt;
  return *s.best_of;
}

// The engine request of one tokenized prompt. `prompt_param` names the field errors point at.
absl::StatusOr<EngineRequest> MakeEngineRequest(const ServingContext& ctx,
                                                const api::SamplingRequest& s,
                                                std::vector<int32_t> prompt,
                                                std::optional<int> logprobs,
                                                std::optional<int64_t> default_max_tokens,
                                                std::string_view prompt_param) {
  if (s.truncate_prompt_tokens.has_value() && *s.truncate_prompt_tokens >= 0 &&
      static_cast<size_t>(*s.truncate_prompt_tokens) < prompt.size()) {
    prompt.erase(prompt.begin(),
                 prompt.end() - static_cast<std::ptrdiff_t>(*s.truncate_prompt_tokens));
  }
  if (prompt.empty())
    return api::InvalidParam(prompt_param, "The prompt must not be empty.");
  api::SamplingRequest resolved = s;
  if (!resolved.max_tokens.has_value() && default_max_tokens.has_value()) {
    resolved.max_tokens = std::min<int64_t>(
        *default_max_tokens, ctx.max_model_len - static_cast<int64_t>(prompt.size()));
  }
  SY_ASSIGN_OR_RETURN(const int64_t max_tokens,
                      api::ResolveMaxTokens(resolved, static_cast<int64_t>(prompt.size()),
                                            ctx.max_model_len, prompt_param));
  EngineRequest r;
  r.prompt_tokens = std::move(prompt);
  const std::optional<int32_t> best_of = RankedBestOf(s);
  r.n = best_of.value_or(s.n);
  SamplingParams& p = r.sampling;
  const GenerationDefaults& d = ctx.defaults;
  p.temperature = s.temperature.value_or(d.temperature.value_or(1.0));
  p.top_p = s.top_p.value_or(d.top_p.value_or(1.0));
  p.top_k = s.top_k.value_or(d.top_k.value_or(-1));
  if (p.top_k == 0)
    p.top_k = -1;
  p.min_p = s.min_p.value_or(d.min_p.value_or(0.0));
  p.repetition_penalty = s.repetition_penalty.value_or(d.repetition_penalty.value_or(1.0));
  p.presence_penalty = s.presence_penalty;
  p.frequency_penalty = s.frequency_penalty;
  if (s.seed.has_value())
    p.seed = static_cast<uint64_t>(*s.seed);
  if (logprobs.has_value()) {
    p.logprobs = *logprobs;
  } else if (best_of.has_value()) {
    p.logprobs = 0;  // the sampled tokens' logprobs rank the sequences
  }
  for (const auto& [id, bias] : s.logit_bias)
    p.logit_bias.emplace_back(id, static_cast<float>(bias));
  p.allowed_token_ids = s.allowed_token_ids;
  r.stop.max_tokens = max_tokens;
  r.stop.min_tokens = std::min<int32_t>(s.min_tokens, static_cast<int32_t>(max_tokens));
  r.stop.stop_strings = s.stop;
  r.stop.stop_token_ids = s.stop_token_ids;
  r.stop.ignore_eos = s.ignore_eos;
  r.stop.include_stop_str_in_output = s.include_stop_str_in_output;
  if (!s.bad_words.empty()) {
    absl::StatusOr<std::vector<std::vector<int32_t>>> bad_words =
        TokenizeBadWords(*ctx.tokenizer, s.bad_words);
    if (!bad_words.ok())
      return api::InvalidParam("bad_words", std::string(bad_words.status().message()));
    r.bad_words = *std::move(bad_words);
  }
  r.skip_special_tokens = s.skip_special_tokens;
  r.spaces_between_special_tokens = s.spaces_between_special_tokens;
  if (s.prompt_logprobs.has_value())
    r.prompt_logprobs = *s.prompt_logprobs;
  r.priority = s.priority;
  r.hash_extras.cache_salt = s.cache_salt;
  if (!s.kv_transfer_params.empty()) {
    absl::StatusOr<kvx::KvTransferParams> kv = kvx::ParseKvTransferParams(s.kv_transfer_params);
    if (!kv.ok())
      return api::InvalidParam("kv_transfer_params", std::string(kv.status().message()));
    r.kv_transfer = *std::move(kv);
  }
  SY_RETURN_IF_ERROR(ctx.engine->Validate(r));
  return r;
}

// Runs one beam search per prompt (vLLM's beam_search in its serving layer); each answers
// its prompt's n choices at once. A failed search cancels the others; a client that leaves
// cancels them all.
void SubmitBeamSearch(const ServingContext& ctx, Submission sub,
                      const std::shared_ptr<internal::GenerationStream>& stream,
                      const std::string& base_id, std::shared_ptr<net::HttpResponder> responder) {
  // Weak: the runs are owned by their in-flight engine callbacks, never by the connection.
  auto group = std::make_shared<std::vector<std::weak_ptr<internal::BeamSearchRun>>>();
  std::vector<std::shared_ptr<internal::BeamSearchRun>> runs;
  for (size_t i = 0; i < sub.requests.size(); ++i) {
    const EngineRequest& r = sub.requests[i];
    const BeamSearchOptions options{
        .beam_width = r.n,
        .max_tokens = r.stop.max_tokens,
        .length_penalty = sub.length_penalty,
        .eos_token_id = ctx.tokenizer->eos_id(),
        .ignore_eos = r.stop.ignore_eos,
        .include_stop_str_in_output = r.stop.include_stop_str_in_output,
    };
    auto done = [stream, group, i](RequestUpdate update) {
      const bool failed = !update.error.ok();
      stream->OnUpdate(i, std::move(update));
      if (!failed)
        return;
      for (const std::weak_ptr<internal::BeamSearchRun>& weak : *group) {
        if (std::shared_ptr<internal::BeamSearchRun> run = weak.lock())
          run->Cancel();
      }
    };
    runs.push_back(std::make_shared<internal::BeamSearchRun>(
        ctx.engine, ctx.tokenizer, r, options, fmt::format("{}-{}", base_id, i), std::move(done)));
    group->push_back(runs.back());
  }
  auto cancel_all = [group] {
    for (const std::weak_ptr<internal::BeamSearchRun>& weak : *group) {
      if (std::shared_ptr<internal::BeamSearchRun> run = weak.lock())
        run->Cancel();
    }
  };
  responder->OnClose(cancel_all);
  for (const std::shared_ptr<internal::BeamSearchRun>& run : runs)
    run->Start();
  // The client may have left before the first steps were in.
  if (responder->closed())
    cancel_all();
}

// Submits every request; on a failure aborts those already in and answers the error.
// The response id is vLLM's: "cmpl-"/"chatcmpl-" + the client's x-request-id when it sent
// one, else + 32 random hex digits; x-request-id echoes the client's id (or the response id).
// Engine-internal ids add random bits and the choice index, so two requests that share a
// client id never collide in the engine.
void SubmitAll(const ServingContext& ctx, Submission sub, const net::HttpRequest& http,
               std::shared_ptr<net::HttpResponder> responder) {
  const auto [hi, lo] = Random128();
  const bool chat = sub.stream.chat;
  const std::optional<std::string_view> client_id = http.Header("x-request-id");
  if (client_id.has_value() && !client_id->empty()) {
    sub.stream.header.id = fmt::format("{}{}", chat ? "chatcmpl-" : "cmpl-", *client_id);
    sub.stream.extra_headers.emplace_back("x-request-id", std::string(*client_id));
  } else {
    sub.stream.header.id = chat ? api::ChatCompletionId(hi, lo) : api::CompletionId(hi, lo);
    sub.stream.extra_headers.emplace_back("x-request-id", sub.stream.header.id);
  }
  sub.stream.header.created = UnixNow();
  sub.stream.tool_call_id_seed = hi ^ (lo << 1);
  sub.stream.header.model = ctx.served_model_name;
  const std::string base_id = fmt::format("{}-{:016x}", sub.stream.header.id, hi ^ lo);
  auto stream =
      std::make_shared<internal::GenerationStream>(std::move(sub.stream), ctx.tokenizer, responder);
  stream->HoldUntilAnswered(std::move(sub.ticket));
  if (sub.beam_search) {
    SubmitBeamSearch(ctx, std::move(sub), stream, base_id, std::move(responder));
    stream->Accept();
    return;
  }
  std::vector<std::string> ids;
  for (size_t i = 0; i < sub.requests.size(); ++i)
    ids.push_back(fmt::format("{}-{}", base_id, i));
  // A client that leaves (in the queue or mid-stream) aborts everything at once.
  EngineCore* engine = ctx.engine;
  responder->OnClose([engine, ids] {
    for (const std::string& id : ids)
      engine->Abort(id);
  });
  for (size_t i = 0; i < sub.requests.size(); ++i) {
    EngineRequest& r = sub.requests[i];
    r.request_id = ids[i];
    absl::Status submitted = engine->Submit(
        std::move(r), [stream, i](RequestUpdate u) { stream->OnUpdate(i, std::move(u)); });
    if (!submitted.ok()) {
      for (size_t j = 0; j < i; ++j)
        engine->Abort(ids[j]);
      stream->Fail(submitted);
      return;
    }
  }
  stream->Accept();
  // The client may have left before the requests were in; OnClose's aborts missed them.
  if (responder->closed()) {
    for (const std::string& id : ids)
      engine->Abort(id);
  }
}

internal::GenerationStreamOptions StreamOptions(const api::SamplingRequest& s, bool chat,
                                                bool logprobs) {
  internal::GenerationStreamOptions o;
  o.chat = chat;
  o.stream = s.stream;
  o.include_usage = s.include_usage_in_stream();
  o.continuous_usage = o.include_usage && s.stream_options->continuous_usage_stats;
  o.n = s.n;
  o.best_of = RankedBestOf(s);
  o.logprobs = logprobs;
  o.prompt_logprobs = s.prompt_logprobs.has_value();
  return o;
}

absl::StatusOr<Submission> PrepareCompletion(const ServingContext& ctx,
                                             const net::HttpRequest& http) {
  SY_ASSIGN_OR_RETURN(api::CompletionRequest req,
                      api::ParseCompletionRequest(http.body, ctx.limits));
  SY_RETURN_IF_ERROR(CheckServedModel(ctx, req.model));
  SY_RETURN_IF_ERROR(CheckSupported(ctx, req.sampling));
  SY_ASSIGN_OR_RETURN(std::shared_ptr<const structured::Grammar> grammar,
                      structured::GrammarForRequest(req.sampling, ctx.grammars));
  // vLLM's echo: with logprobs, the prompt tokens' logprobs are its prompt logprobs (with
  // `logprobs` top ids unless prompt_logprobs is given); with max_tokens 0, one token runs
  // and the prompt alone comes back.
  const bool echo_logprobs = req.echo && req.logprobs.has_value();
  if (echo_logprobs && !req.sampling.prompt_logprobs.has_value())
    req.sampling.prompt_logprobs = *req.logprobs;
  const bool echo_only = req.echo && req.sampling.max_tokens == 0;
  if (echo_only)
    req.sampling.max_tokens = 1;
  Submission sub;
  sub.stream = StreamOptions(req.sampling, false, req.logprobs.has_value());
  sub.stream.echo_logprobs = echo_logprobs;
  sub.stream.echo_top_logprobs = req.logprobs.value_or(0);
  sub.stream.echo_only = echo_only;
  sub.beam_search = req.sampling.use_beam_search;
  sub.length_penalty = req.sampling.length_penalty;
  for (api::Prompt& prompt : req.prompts) {
    std::vector<int32_t> ids;
    if (prompt.is_tokens) {
      ids = std::move(prompt.token_ids);
    } else {
      SY_ASSIGN_OR_RETURN(ids, ctx.tokenizer->Encode(prompt.text, req.add_special_tokens));
    }
    std::string echo;
    if (req.echo)
      echo = prompt.is_tokens ? ctx.tokenizer->Decode(ids, false) : prompt.text;
    SY_ASSIGN_OR_RETURN(EngineRequest r,
                        MakeEngineRequest(ctx, req.sampling, std::move(ids), req.logprobs,
                                          kCompletionDefaultMaxTokens, "prompt"));
    r.grammar = grammar;
    sub.stream.prompt_tokens.push_back(static_cast<int64_t>(r.prompt_tokens.size()));
    sub.stream.first_prompt_token.push_back(r.prompt_tokens.front());
    sub.stream.echo_prefix.push_back(std::move(echo));
    sub.requests.push_back(std::move(r));
  }
  return sub;
}

// What a chat request's tool choice asks of the output, as vLLM's serving_chat decides it: a
// forced choice (named, "required") constrains it to the call's JSON schema and reads the
// calls out of it; "auto" reads them through the server's tool parser, which it needs.
struct ChatTools {
  std::shared_ptr<const structured::Grammar> grammar;  // null: the request's own, if any
  std::shared_ptr<const api::ToolParser> parser;
};

absl::StatusOr<ChatTools> ResolveChatTools(const ServingContext& ctx, const api::ChatRequest& req) {
  ChatTools out;
  switch (req.tools.choice) {
    case api::ToolChoiceMode::kNone:
      return out;
    case api::ToolChoiceMode::kAuto:
      if (!ctx.enable_auto_tool_choice || ctx.tool_parser == nullptr) {
        return absl::InvalidArgumentError(
            "\"auto\" tool choice requires --enable-auto-tool-choice and "
            "--tool-call-parser to be set");
      }
      out.parser = ctx.tool_parser->ForRequest(req.tools.functions);
      if (out.parser == nullptr)
        out.parser = ctx.tool_parser;
      return out;
    case api::ToolChoiceMode::kNamed:
      out.parser = api::NewNamedToolParser(req.tools.choice_name);
      break;
    case api::ToolChoiceMode::kRequired:
      out.parser = api::NewRequiredToolParser();
      break;
  }
  const api::SamplingRequest& s = req.sampling;
  if (s.structured_outputs.has_value() ||
      (s.response_format.has_value() && s.response_format->type != "text")) {
    return absl::InvalidArgumentError(
        "You can only either use constraints for structured outputs or tools, not both.");
  }
  SY_ASSIGN_OR_RETURN(std::string schema, api::ForcedToolSchema(req.tools));
  const structured::StructuredOutputSpec spec{
      structured::StructuredOutputSpec::Kind::kJsonSchema, std::move(schema), {}};
  absl::StatusOr<std::shared_ptr<const structured::Grammar>> grammar =
      ctx.grammars != nullptr ? ctx.grammars->Get(spec) : structured::CompileStructuredOutput(spec);
  if (!grammar.ok())
    return api::InvalidParam("tools", std::string(grammar.status().message()));
  out.grammar = *std::move(grammar);
  return out;
}

absl::StatusOr<Submission> PrepareChat(const ServingContext& ctx, const net::HttpRequest& http) {
  SY_ASSIGN_OR_RETURN(api::ChatRequest req, api::ParseChatRequest(http.body, ctx.limits));
  SY_RETURN_IF_ERROR(CheckServedModel(ctx, req.model));
  SY_RETURN_IF_ERROR(CheckSupported(ctx, req.sampling));
  SY_ASSIGN_OR_RETURN(ChatTools tools, ResolveChatTools(ctx, req));
  std::shared_ptr<const structured::Grammar> grammar = tools.grammar;
  if (grammar == nullptr) {
    SY_ASSIGN_OR_RETURN(grammar, structured::GrammarForRequest(req.sampling, ctx.grammars));
  }
  if (req.tools.choice == api::ToolChoiceMode::kNone && ctx.exclude_tools_when_tool_choice_none)
    req.tools.tools.clear();
  SY_ASSIGN_OR_RETURN(std::string prompt_text,
                      text::RenderChatPrompt(req, ctx.chat_template, ctx.chat_special_tokens));
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                      ctx.tokenizer->Encode(prompt_text, req.add_special_tokens));
  std::optional<int> logprobs;
  if (req.logprobs)
    logprobs = req.top_logprobs;
  Submission sub;
  sub.stream = StreamOptions(req.sampling, true, req.logprobs);
  sub.stream.tool_parser = std::move(tools.parser);
  sub.stream.tool_choice = req.tools.choice;
  sub.stream.parallel_tool_calls = req.tools.parallel_tool_calls.value_or(true);
  // A forced choice's output is the grammar's JSON from its first token: nothing to split.
  if (tools.grammar == nullptr)
    sub.stream.reasoning_parser = ctx.reasoning_parser;
  sub.beam_search = req.sampling.use_beam_search;
  sub.length_penalty = req.sampling.length_penalty;
  SY_ASSIGN_OR_RETURN(EngineRequest r, MakeEngineRequest(ctx, req.sampling, std::move(ids),
                                                         logprobs, std::nullopt, "messages"));
  r.grammar = std::move(grammar);
  sub.stream.prompt_tokens.push_back(static_cast<int64_t>(r.prompt_tokens.size()));
  std::string echo;
  if (req.echo && !req.messages.empty() && req.messages.back().role == "assistant")
    echo = req.messages.back().content;
  sub.stream.echo_prefix.push_back(std::move(echo));
  sub.requests.push_back(std::move(r));
  return sub;
}

// Takes the drain's ticket for a new generation request, or answers the refusal: 503 with
// Retry-After (a router retries elsewhere), closing the connection so that the client's next
// request opens one to a server that is staying.
std::optional<base::DrainGate::Ticket> Admit(const ServingContext& ctx,
                                             net::HttpResponder& responder) {
  if (ctx.drain == nullptr)
    return base::DrainGate::Ticket();
  base::DrainGate::Ticket ticket = ctx.drain->Admit();
  if (ticket == nullptr) {
    const absl::Status status =
        absl::UnavailableError("The server is shutting down; retry on another server.");
    responder.Send(503, "application/json", api::ErrorBody(status),
                   {{"retry-after", "1"}, {"connection", "close"}});
    return std::nullopt;
  }
  return ticket;
}

// The router's x-kv-cache-source-host-port, on every request of the submission.
absl::StatusOr<Submission> WithKvSource(const net::HttpRequest& http, Submission sub) {
  const std::optional<std::string_view> header = http.Header("x-kv-cache-source-host-port");
  if (!header.has_value())
    return sub;
  absl::StatusOr<net::HostPort> source = net::ParseHostPort(*header);
  if (!source.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("x-kv-cache-source-host-port: {}", std::string(source.status().message())));
  }
  for (EngineRequest& r : sub.requests)
    r.kv_source = *source;
  return sub;
}

using PrepareFn = absl::StatusOr<Submission> (*)(const ServingContext&, const net::HttpRequest&);

void HandleGeneration(const ServingContext& ctx, const net::HttpRequest& request,
                      std::shared_ptr<net::HttpResponder> responder, PrepareFn prepare) {
  std::optional<base::DrainGate::Ticket> ticket = Admit(ctx, *responder);
  if (!ticket.has_value())
    return;
  absl::StatusOr<Submission> sub = prepare(ctx, request);
  if (sub.ok())
    sub = WithKvSource(request, *std::move(sub));
  if (!sub.ok()) {
    SendError(*responder, sub.status());
    return;
  }
  sub->ticket = *std::move(ticket);
  SubmitAll(ctx, *std::move(sub), request, std::move(responder));
}

}  // namespace

void SendError(net::HttpResponder& responder, const absl::Status& status) {
  responder.Send(api::HttpErrorFor(status).http_status, "application/json", api::ErrorBody(status));
}

void HandleCompletion(const ServingContext& ctx, const net::HttpRequest& request,
                      std::shared_ptr<net::HttpResponder> responder) {
  HandleGeneration(ctx, request, std::move(responder), &PrepareCompletion);
}

void HandleChatCompletion(const ServingContext& ctx, const net::HttpRequest& request,
                          std::shared_ptr<net::HttpResponder> responder) {
  HandleGeneration(ctx, request, std::move(responder), &PrepareChat);
}

}  // namespace switchyard::engine
