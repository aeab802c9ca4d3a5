#include "engine/internal/generation_stream.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "fmt/format.h"

#include "api/error.h"
#include "engine/best_of.h"

namespace switchyard::engine::internal {
namespace {

constexpr std::string_view kJson = "application/json";
// An SSE comment line: clients skip it; proxies and routers see bytes flowing.
constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";
// 503s ask the client to retry (elsewhere: a router picks another engine).
constexpr std::string_view kRetryAfterSeconds = "1";

std::string StopReasonText(const StopReason& reason) {
  if (const auto* s = std::get_if<std::string>(&reason))
    return *s;
  if (const auto* id = std::get_if<int32_t>(&reason))
    return std::to_string(*id);
  return "";
}

}  // namespace

GenerationStream::GenerationStream(GenerationStreamOptions options,
                                   const text::Tokenizer* tokenizer,
                                   std::shared_ptr<net::HttpResponder> responder)
    : options_(std::move(options)), tokenizer_(tokenizer), responder_(std::move(responder)) {
  base::MutexLock lock(&mu_);
  tool_call_ids_.seed(options_.tool_call_id_seed);
  const size_t num_prompts = options_.prompt_tokens.size();
  choices_.resize(num_prompts * SequencesPerPrompt());
  cached_tokens_.assign(num_prompts, 0);
  echoed_.assign(num_prompts, false);
  if (KeepsPromptLogprobs())
    prompt_logprobs_.resize(num_prompts);
  if (!options_.stream) {
    for (size_t i = 0; i < choices_.size(); ++i)
      choices_[i].text = options_.echo_prefix[i / SequencesPerPrompt()];
  } else if (ParsesChat()) {
    for (Choice& choice : choices_) {
      choice.parser =
          std::make_unique<api::ChatOutputParser>(options_.reasoning_parser, options_.tool_parser);
    }
  }
}

bool GenerationStream::ParsesChat() const {
  return options_.chat && (options_.tool_parser != nullptr || options_.reasoning_parser != nullptr);
}

std::string GenerationStream::NextToolCallId() {
  const uint64_t hi = tool_call_ids_();
  const uint64_t lo = tool_call_ids_();
  return api::ToolCallId(options_.tool_parser->id_kind(), hi, lo);
}

std::string GenerationStream::ToolFinishReason(const std::string& engine_reason,
                                               bool called) const {
  const api::ToolChoiceMode mode = options_.tool_choice;
  const bool calls_finish =
      called && (mode == api::ToolChoiceMode::kAuto || mode == api::ToolChoiceMode::kRequired);
  return calls_finish && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

void GenerationStream::ParseDelta(Choice& choice, const std::string& text, bool finishing,
                                  api::ChatChoice* c) {
  api::ChatDelta delta = choice.parser->Push(text);
  if (finishing) {
    api::ChatDelta end = choice.parser->Finish();
    delta.reasoning += end.reasoning;
    delta.content += end.content;
    for (api::ToolCallDelta& call : end.tool_calls)
      delta.tool_calls.push_back(std::move(call));
  }
  c->reasoning = std::move(delta.reasoning);
  c->content = std::move(delta.content);
  for (api::ToolCallDelta& call : delta.tool_calls) {
    if (!options_.parallel_tool_calls && call.index > 0)
      continue;
    c->tool_calls.push_back({call.index, call.first ? NextToolCallId() : std::string(),
                             std::move(call.name), std::move(call.arguments)});
  }
  choice.tools_streamed = choice.tools_streamed || !c->tool_calls.empty();
}

void GenerationStream::ParseComplete(std::string_view generated, api::ChatChoice* c) {
  const api::ChatOutputParser parser(options_.reasoning_parser, options_.tool_parser);
  api::ChatOutput out = parser.Complete(generated);
  c->reasoning = std::move(out.reasoning);
  c->content.append(out.content);
  const size_t answered =
      options_.parallel_tool_calls ? out.calls.size() : std::min<size_t>(out.calls.size(), 1);
  for (size_t i = 0; i < answered; ++i) {
    c->tool_calls.push_back({static_cast<int>(i), NextToolCallId(), std::move(out.calls[i].name),
                             std::move(out.calls[i].arguments)});
  }
  // vLLM: the content of an "auto" call without text before it is null.
  c->content_null = options_.tool_choice == api::ToolChoiceMode::kAuto && c->content.empty() &&
                    !c->tool_calls.empty();
  c->finish_reason = ToolFinishReason(c->finish_reason, !c->tool_calls.empty());
}

size_t GenerationStream::SequencesPerPrompt() const {
  return static_cast<size_t>(options_.best_of.value_or(options_.n));
}

bool GenerationStream::KeepsPromptLogprobs() const {
  return options_.echo_logprobs || (options_.prompt_logprobs && !options_.stream);
}

void GenerationStream::BeginStream() {
  if (answered_)
    return;
  responder_->StartStream(200, "text/event-stream", options_.extra_headers);
  answered_ = true;
  for (size_t prompt = 0; prompt < echoed_.size(); ++prompt)
    SendEchoIfReady(prompt);
}

void GenerationStream::SendEchoIfReady(size_t prompt) {
  if (echoed_[prompt])
    return;
  // Position 0 has no prompt logprob: a prompt of k tokens has k - 1.
  if (options_.echo_logprobs) {
    const auto have = static_cast<int64_t>(prompt_logprobs_[prompt].size());
    if (have < options_.prompt_tokens[prompt] - 1)
      return;
  }
  SendEcho(prompt);
}

void GenerationStream::SendEcho(size_t prompt) {
  echoed_[prompt] = true;
  const std::string& prefix = options_.echo_prefix[prompt];
  std::optional<std::vector<api::TokenLogprob>> lps;
  size_t lps_chars = 0;
  if (options_.echo_logprobs) {
    lps = EchoLogprobs(prompt);
    for (const api::TokenLogprob& lp : *lps)
      lps_chars += api::TextOffsetLength(lp.token);
  }
  const api::Usage usage{options_.prompt_tokens[prompt], 0, std::nullopt};
  const api::Usage* chunk_usage = options_.continuous_usage ? &usage : nullptr;
  const size_t per_prompt = SequencesPerPrompt();
  for (size_t i = prompt * per_prompt; i < (prompt + 1) * per_prompt; ++i) {
    Choice& choice = choices_[i];
    if (!prefix.empty() && options_.chat) {
      api::ChatChoice c;
      c.index = static_cast<int>(i);
      c.content = prefix;
      responder_->Write(api::ChatCompletionChunk(options_.header, c, true, chunk_usage));
      choice.sent_role = true;
    } else if (!prefix.empty()) {
      api::CompletionChoice c;
      c.index = static_cast<int>(i);
      c.text = prefix;
      c.logprobs = lps;
      choice.text_chars = lps_chars;
      responder_->Write(api::CompletionChunk(options_.header, c, chunk_usage));
    }
    std::vector<SequenceUpdate> held = std::move(choice.held);
    for (SequenceUpdate& seq : held)
      TakeSequence(prompt, std::move(seq));
  }
}

std::string GenerationStream::DecodeOne(int32_t id) const {
  return tokenizer_->Decode(std::span<const int32_t>(&id, 1), false);
}

api::TokenLogprob GenerationStream::ToApiLogprob(const SampleResult& sample) const {
  api::TokenLogprob out;
  out.token = DecodeOne(sample.token);
  out.logprob = sample.logprob;
  out.top.reserve(sample.top_logprobs.size() + 1);
  // Completions (vLLM): the sampled token first, then the top ones, so a token sampled
  // outside the top N still shows (N + 1 entries). Chat: the top N only, as OpenAI's.
  bool sampled_in_top = options_.chat;
  for (const TokenLogprob& t : sample.top_logprobs)
    sampled_in_top = sampled_in_top || t.token == sample.token;
  if (!sampled_in_top)
    out.top.push_back({out.token, sample.logprob});
  for (const TokenLogprob& t : sample.top_logprobs)
    out.top.push_back({DecodeOne(t.token), t.logprob});
  return out;
}

std::vector<api::PromptLogprobEntry> GenerationStream::ToPromptLogprob(
    const SampleResult& sample) const {
  // vLLM fills a dict with the prompt token, then the top ids by rank: a prompt token that
  // is among them keeps the first place and takes that entry's rank.
  int64_t rank = sample.rank;
  for (size_t j = 0; j < sample.top_logprobs.size(); ++j) {
    if (sample.top_logprobs[j].token == sample.token) {
      rank = static_cast<int64_t>(j) + 1;
      break;
    }
  }
  std::vector<api::PromptLogprobEntry> out;
  out.reserve(sample.top_logprobs.size() + 1);
  out.push_back({sample.token, sample.logprob, rank, DecodeOne(sample.token)});
  for (size_t j = 0; j < sample.top_logprobs.size(); ++j) {
    const TokenLogprob& t = sample.top_logprobs[j];
    if (t.token != sample.token)
      out.push_back({t.token, t.logprob, static_cast<int64_t>(j) + 1, DecodeOne(t.token)});
  }
  return out;
}

std::vector<api::TokenLogprob> GenerationStream::EchoLogprobs(size_t prompt) const {
  return api::EchoedPromptLogprobs(DecodeOne(options_.first_prompt_token[prompt]),
                                   prompt_logprobs_[prompt], options_.echo_top_logprobs);
}

void GenerationStream::HoldUntilAnswered(std::shared_ptr<void> ticket) {
  base::MutexLock lock(&mu_);
  ticket_ = std::move(ticket);
}

void GenerationStream::Accept() {
  base::MutexLock lock(&mu_);
  if (options_.stream && prompts_finished_ <= options_.prompt_tokens.size())
    BeginStream();
}

void GenerationStream::ReleaseWhenWritten() {
  if (ticket_ == nullptr)
    return;
  // Run (or dropped) once the bytes are written or the connection closed: either way the
  // capture, and with it the ticket, goes.
  responder_->OnDrained(0, [ticket = std::move(ticket_)] {});
  ticket_ = nullptr;
}

void GenerationStream::OnUpdate(size_t prompt, RequestUpdate update) {
  base::MutexLock lock(&mu_);
  if (prompts_finished_ > options_.prompt_tokens.size())
    return;  // failed before
  if (update.keep_alive) {
    if (options_.stream && answered_)
      responder_->Write(std::string(kSseKeepAlive));
    return;
  }
  if (!update.error.ok()) {
    FailLocked(update.error);
    return;
  }
  cached_tokens_[prompt] = update.num_cached_tokens;
  if (!update.kv_transfer_params.empty())
    kv_transfer_params_ = std::move(update.kv_transfer_params);
  if (KeepsPromptLogprobs()) {
    for (const SampleResult& s : update.prompt_logprobs)
      prompt_logprobs_[prompt].push_back(ToPromptLogprob(s));
  }
  if (options_.stream) {
    BeginStream();
    SendEchoIfReady(prompt);
  }
  for (SequenceUpdate& seq : update.sequences)
    TakeSequence(prompt, std::move(seq));
  if (update.finished && ++prompts_finished_ == options_.prompt_tokens.size())
    Finish();
}

void GenerationStream::TakeSequence(size_t prompt, SequenceUpdate seq) {
  const size_t index = prompt * SequencesPerPrompt() + static_cast<size_t>(seq.index);
  Choice& choice = choices_[index];
  if (options_.stream && !echoed_[prompt]) {
    choice.held.push_back(std::move(seq));
    return;
  }
  choice.num_tokens += static_cast<int64_t>(seq.token_ids.size());
  for (const SampleResult& s : seq.logprobs)
    choice.cumulative_logprob += s.logprob;
  if (seq.finish_reason.has_value()) {
    choice.finish_reason = std::string(FinishReasonName(*seq.finish_reason));
    choice.stop_reason = StopReasonText(seq.stop_reason);
  }
  if (options_.echo_only) {
    seq.text.clear();
    seq.logprobs.clear();
  }
  std::vector<api::TokenLogprob> lps;
  if (options_.logprobs) {
    lps.reserve(seq.logprobs.size());
    for (const SampleResult& s : seq.logprobs)
      lps.push_back(ToApiLogprob(s));
  }
  if (options_.stream) {
    StreamChoice(index, seq, std::move(lps));
  } else {
    choice.text.append(seq.text);
    for (api::TokenLogprob& lp : lps)
      choice.logprobs.push_back(std::move(lp));
  }
}

void GenerationStream::StreamChoice(size_t index, const SequenceUpdate& update,
                                    std::vector<api::TokenLogprob> lps) {
  Choice& choice = choices_[index];
  const bool finishing = update.finish_reason.has_value();
  // Tokens whose text is held back still move a continuous usage count, as in vLLM.
  if (update.text.empty() && lps.empty() && !finishing && choice.sent_role &&
      (!options_.continuous_usage || update.token_ids.empty())) {
    return;
  }
  const size_t offset = choice.text_chars;
  for (const api::TokenLogprob& lp : lps)
    choice.text_chars += api::TextOffsetLength(lp.token);
  // vLLM's continuous usage: the prompt's tokens and this choice's completion tokens so far.
  const api::Usage usage{options_.prompt_tokens[index / SequencesPerPrompt()], choice.num_tokens,
                         std::nullopt};
  const api::Usage* chunk_usage = options_.continuous_usage ? &usage : nullptr;
  if (options_.chat) {
    api::ChatChoice c;
    c.index = static_cast<int>(index);
    if (choice.parser != nullptr) {
      ParseDelta(choice, update.text, finishing, &c);
      // Held-back text (a marker's first bytes) sends nothing yet, as vLLM's parsers do.
      if (c.content.empty() && c.reasoning.empty() && c.tool_calls.empty() && !finishing &&
          choice.sent_role && lps.empty() && !options_.continuous_usage) {
        return;
      }
    } else {
      c.content = update.text;
    }
    if (options_.logprobs)
      c.logprobs = std::move(lps);
    if (finishing)
      c.finish_reason = choice.parser != nullptr
                            ? ToolFinishReason(choice.finish_reason, choice.tools_streamed)
                            : choice.finish_reason;
    responder_->Write(api::ChatCompletionChunk(options_.header, c, !choice.sent_role, chunk_usage));
    choice.sent_role = true;
  } else {
    api::CompletionChoice c;
    c.index = static_cast<int>(index);
    c.text = update.text;
    if (options_.logprobs) {
      c.logprobs = std::move(lps);
      c.text_offset_base = offset;
    }
    if (finishing) {
      c.finish_reason = choice.finish_reason;
      c.stop_reason = choice.stop_reason;
    }
    responder_->Write(api::CompletionChunk(options_.header, c, chunk_usage));
  }
}

api::Usage GenerationStream::TotalUsage() const {
  api::Usage usage;
  int64_t cached = 0;
  for (size_t p = 0; p < options_.prompt_tokens.size(); ++p) {
    usage.prompt_tokens += options_.prompt_tokens[p];
    cached += cached_tokens_[p];
  }
  for (const Choice& c : choices_)
    usage.completion_tokens += c.num_tokens;
  usage.cached_tokens = cached;
  return usage;
}

void GenerationStream::Finish() {
  if (options_.stream) {
    // A prompt whose request ended before its prompt logprobs were all in (an abort) still
    // gets its echo and what its choices held.
    for (size_t prompt = 0; prompt < echoed_.size(); ++prompt) {
      if (!echoed_[prompt])
        SendEcho(prompt);
    }
    if (options_.include_usage) {
      const api::Usage usage = TotalUsage();
      responder_->Write(options_.chat ? api::ChatUsageChunk(options_.header, usage)
                                      : api::CompletionUsageChunk(options_.header, usage));
    }
    responder_->Write(std::string(api::kSseDone));
    responder_->End();
    ReleaseWhenWritten();
    return;
  }
  answered_ = true;
  // The generated sequence behind each answered choice: in order, or a prompt's best n.
  const auto n = static_cast<size_t>(options_.n);
  const size_t per_prompt = SequencesPerPrompt();
  const size_t num_prompts = options_.prompt_tokens.size();
  std::vector<size_t> source(num_prompts * n);
  std::vector<double> cumulative(options_.best_of ? per_prompt : 0);
  for (size_t p = 0; p < num_prompts; ++p) {
    if (!options_.best_of) {
      for (size_t r = 0; r < n; ++r)
        source[p * n + r] = p * n + r;
      continue;
    }
    for (size_t j = 0; j < per_prompt; ++j)
      cumulative[j] = choices_[p * per_prompt + j].cumulative_logprob;
    const std::vector<int32_t> best = SelectBestOf(cumulative, options_.n);
    for (size_t r = 0; r < n; ++r)
      source[p * n + r] = p * per_prompt + static_cast<size_t>(best[r]);
  }
  const api::Usage usage = TotalUsage();
  std::string body;
  if (options_.chat) {
    std::vector<api::ChatChoice> out(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      Choice& choice = choices_[source[i]];
      out[i].index = static_cast<int>(i);
      out[i].finish_reason = choice.finish_reason;
      if (ParsesChat()) {
        // The echoed prefix is the client's, not the model's: only the output is parsed.
        const std::string& echo = options_.echo_prefix[source[i] / per_prompt];
        out[i].content = echo;
        ParseComplete(std::string_view(choice.text).substr(echo.size()), &out[i]);
      } else {
        out[i].content = std::move(choice.text);
      }
      if (options_.logprobs)
        out[i].logprobs = std::move(choice.logprobs);
    }
    body = api::ChatCompletionResponse(options_.header, out, usage, kv_transfer_params_,
                                       options_.prompt_logprobs ? &prompt_logprobs_[0] : nullptr);
  } else {
    std::vector<api::CompletionChoice> out(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      Choice& choice = choices_[source[i]];
      const size_t prompt = i / n;
      out[i].index = static_cast<int>(i);
      out[i].text = std::move(choice.text);
      if (options_.logprobs) {
        std::vector<api::TokenLogprob> lps;
        if (options_.echo_logprobs)
          lps = EchoLogprobs(prompt);
        for (api::TokenLogprob& lp : choice.logprobs)
          lps.push_back(std::move(lp));
        out[i].logprobs = std::move(lps);
      }
      out[i].finish_reason = choice.finish_reason;
      out[i].stop_reason = choice.stop_reason;
      if (options_.prompt_logprobs)
        out[i].prompt_logprobs = prompt_logprobs_[prompt];
    }
    body = api::CompletionResponse(options_.header, out, usage, kv_transfer_params_);
  }
  responder_->Send(200, kJson, std::move(body), options_.extra_headers);
  ReleaseWhenWritten();
}

void GenerationStream::Fail(const absl::Status& status) {
  base::MutexLock lock(&mu_);
  FailLocked(status);
}

void GenerationStream::FailLocked(const absl::Status& status) {
  if (options_.stream && answered_) {
    responder_->Write(api::SseError(status));
    responder_->Write(std::string(api::kSseDone));
    responder_->End();
  } else if (!answered_) {
    const int http_status = api::HttpErrorFor(status).http_status;
    net::HeaderList headers = options_.extra_headers;
    if (http_status == 503)
      headers.emplace_back("retry-after", std::string(kRetryAfterSeconds));
    responder_->Send(http_status, kJson, api::ErrorBody(status), std::move(headers));
  }
  answered_ = true;
  prompts_finished_ = options_.prompt_tokens.size() + 1;
  ReleaseWhenWritten();
}

}  // namespace switchyard::engine::internal
