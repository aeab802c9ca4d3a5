#include "engine/internal/generation_stream.h"

#include <utility>
#include <variant>

#include "fmt/format.h"

#include "api/error.h"

namespace switchyard::engine::internal {
namespace {

constexpr std::string_view kJson = "application/json";

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
  const size_t num_prompts = options_.prompt_tokens.size();
  choices_.resize(num_prompts * static_cast<size_t>(options_.n));
  cached_tokens_.assign(num_prompts, 0);
  if (options_.prompt_logprobs)
    prompt_logprobs_.resize(num_prompts);
  for (size_t i = 0; i < choices_.size(); ++i) {
    const std::string& prefix = options_.echo_prefix[i / static_cast<size_t>(options_.n)];
    choices_[i].text_chars = api::TextOffsetLength(prefix);
    if (!options_.stream)
      choices_[i].text = prefix;
  }
}

void GenerationStream::BeginStream() {
  if (answered_)
    return;
  responder_->StartStream(200, "text/event-stream", options_.extra_headers);
  answered_ = true;
  // Echoed prompts go out first, one chunk per choice.
  for (size_t i = 0; i < choices_.size(); ++i) {
    const size_t prompt = i / static_cast<size_t>(options_.n);
    const std::string& prefix = options_.echo_prefix[prompt];
    if (prefix.empty())
      continue;
    const api::Usage usage{options_.prompt_tokens[prompt], 0, std::nullopt};
    const api::Usage* chunk_usage = options_.continuous_usage ? &usage : nullptr;
    if (options_.chat) {
      api::ChatChoice c;
      c.index = static_cast<int>(i);
      c.content = prefix;
      responder_->Write(api::ChatCompletionChunk(options_.header, c, true, chunk_usage));
      choices_[i].sent_role = true;
    } else {
      api::CompletionChoice c;
      c.index = static_cast<int>(i);
      c.text = prefix;
      responder_->Write(api::CompletionChunk(options_.header, c, chunk_usage));
    }
  }
}

std::string GenerationStream::DecodeOne(int32_t id) const {
  return tokenizer_->Decode(std::span<const int32_t>(&id, 1), false);
}

api::TokenLogprob GenerationStream::ToApiLogprob(const SampleResult& sample) const {
  api::TokenLogprob out;
  out.token = DecodeOne(sample.token);
  out.logprob = sample.logprob;
  out.top.reserve(sample.top_logprobs.size());
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

void GenerationStream::OnUpdate(size_t prompt, RequestUpdate update) {
  base::MutexLock lock(&mu_);
  if (prompts_finished_ > options_.prompt_tokens.size())
    return;  // failed before
  if (!update.error.ok()) {
    FailLocked(update.error);
    return;
  }
  if (options_.stream)
    BeginStream();
  cached_tokens_[prompt] = update.num_cached_tokens;
  if (options_.prompt_logprobs && !options_.stream) {
    for (const SampleResult& s : update.prompt_logprobs)
      prompt_logprobs_[prompt].push_back(ToPromptLogprob(s));
  }
  for (SequenceUpdate& seq : update.sequences) {
    const int index = static_cast<int>(prompt) * options_.n + seq.index;
    Choice& choice = choices_[static_cast<size_t>(index)];
    choice.num_tokens += static_cast<int64_t>(seq.token_ids.size());
    std::vector<api::TokenLogprob> lps;
    lps.reserve(seq.logprobs.size());
    for (const SampleResult& s : seq.logprobs)
      lps.push_back(ToApiLogprob(s));
    if (seq.finish_reason.has_value()) {
      choice.finish_reason = std::string(FinishReasonName(*seq.finish_reason));
      choice.stop_reason = StopReasonText(seq.stop_reason);
    }
    if (options_.stream) {
      StreamChoice(index, seq, std::move(lps));
    } else {
      choice.text.append(seq.text);
      for (api::TokenLogprob& lp : lps)
        choice.logprobs.push_back(std::move(lp));
    }
  }
  if (update.finished && ++prompts_finished_ == options_.prompt_tokens.size())
    Finish();
}

void GenerationStream::StreamChoice(int index, const SequenceUpdate& update,
                                    std::vector<api::TokenLogprob> lps) {
  Choice& choice = choices_[static_cast<size_t>(index)];
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
  const api::Usage usage{options_.prompt_tokens[static_cast<size_t>(index / options_.n)],
                         choice.num_tokens, std::nullopt};
  const api::Usage* chunk_usage = options_.continuous_usage ? &usage : nullptr;
  if (options_.chat) {
    api::ChatChoice c;
    c.index = index;
    c.content = update.text;
    if (options_.logprobs)
      c.logprobs = std::move(lps);
    if (finishing)
      c.finish_reason = choice.finish_reason;
    responder_->Write(api::ChatCompletionChunk(options_.header, c, !choice.sent_role, chunk_usage));
    choice.sent_role = true;
  } else {
    api::CompletionChoice c;
    c.index = index;
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
  const api::Usage usage = TotalUsage();
  if (options_.stream) {
    if (options_.include_usage) {
      responder_->Write(options_.chat ? api::ChatUsageChunk(options_.header, usage)
                                      : api::CompletionUsageChunk(options_.header, usage));
    }
    responder_->Write(std::string(api::kSseDone));
    responder_->End();
    return;
  }
  answered_ = true;
  std::string body;
  if (options_.chat) {
    std::vector<api::ChatChoice> out(choices_.size());
    for (size_t i = 0; i < choices_.size(); ++i) {
      out[i].index = static_cast<int>(i);
      out[i].content = std::move(choices_[i].text);
      if (options_.logprobs)
        out[i].logprobs = std::move(choices_[i].logprobs);
      out[i].finish_reason = choices_[i].finish_reason;
    }
    body = api::ChatCompletionResponse(options_.header, out, usage, {},
                                       options_.prompt_logprobs ? &prompt_logprobs_[0] : nullptr);
  } else {
    std::vector<api::CompletionChoice> out(choices_.size());
    for (size_t i = 0; i < choices_.size(); ++i) {
      out[i].index = static_cast<int>(i);
      out[i].text = std::move(choices_[i].text);
      if (options_.logprobs) {
        out[i].logprobs = std::move(choices_[i].logprobs);
        out[i].text_offset_base =
            api::TextOffsetLength(options_.echo_prefix[i / static_cast<size_t>(options_.n)]);
      }
      out[i].finish_reason = choices_[i].finish_reason;
      out[i].stop_reason = choices_[i].stop_reason;
      if (options_.prompt_logprobs)
        out[i].prompt_logprobs = prompt_logprobs_[i / static_cast<size_t>(options_.n)];
    }
    body = api::CompletionResponse(options_.header, out, usage);
  }
  responder_->Send(200, kJson, std::move(body), options_.extra_headers);
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
    responder_->Send(api::HttpErrorFor(status).http_status, kJson, api::ErrorBody(status),
                     options_.extra_headers);
  }
  answered_ = true;
  prompts_finished_ = options_.prompt_tokens.size() + 1;
}

}  // namespace switchyard::engine::internal
