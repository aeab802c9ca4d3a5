#include "engine/internal/beam_search_run.h"

#include <span>
#include <utility>

#include "fmt/format.h"

namespace switchyard::engine::internal {

BeamSearchRun::BeamSearchRun(EngineCore* engine, const text::Tokenizer* tokenizer,
                             const EngineRequest& request, BeamSearchOptions options,
                             std::string id_prefix, DoneCallback done)
    : engine_(engine),
      tokenizer_(tokenizer),
      prompt_(request.prompt_tokens),
      result_logprobs_(request.sampling.logprobs),
      priority_(request.priority),
      hash_extras_(request.hash_extras),
      options_(options),
      id_prefix_(std::move(id_prefix)),
      done_(std::move(done)),
      search_(options, static_cast<int64_t>(request.prompt_tokens.size())) {}

void BeamSearchRun::Start() {
  std::optional<RequestUpdate> report;
  {
    base::MutexLock lock(&mu_);
    if (over_)
      return;
    report = Advance();
  }
  if (report.has_value())
    done_(*std::move(report));
}

void BeamSearchRun::Cancel() {
  std::vector<std::string> ids;
  {
    base::MutexLock lock(&mu_);
    if (over_)
      return;
    over_ = true;
    ids = step_ids_;
  }
  for (std::string& id : ids)
    engine_->Abort(std::move(id));
}

std::optional<RequestUpdate> BeamSearchRun::SubmitStep() {
  const std::vector<Beam>& live = search_.live();
  const int64_t step = search_.steps();
  step_ids_.clear();
  step_results_.assign(live.size(), SampleResult{});
  step_pending_ = live.size();
  for (size_t i = 0; i < live.size(); ++i) {
    EngineRequest r;
    r.request_id = fmt::format("{}-s{}-b{}", id_prefix_, step, i);
    r.prompt_tokens.reserve(prompt_.size() + live[i].tokens.size());
    r.prompt_tokens = prompt_;
    r.prompt_tokens.insert(r.prompt_tokens.end(), live[i].tokens.begin(), live[i].tokens.end());
    // Only the raw top-2w logprobs matter; greedy keeps the sampled token among them.
    r.sampling.temperature = 0;
    r.sampling.logprobs = 2 * options_.beam_width;
    r.stop.max_tokens = 1;
    r.stop.ignore_eos = true;
    r.priority = priority_;
    r.hash_extras = hash_extras_;
    std::string id = r.request_id;
    absl::Status submitted =
        engine_->Submit(std::move(r), [self = shared_from_this(), step, i](RequestUpdate update) {
          self->OnStepUpdate(step, i, std::move(update));
        });
    if (!submitted.ok()) {
      for (std::string& done : step_ids_)
        engine_->Abort(std::move(done));
      step_ids_.clear();
      over_ = true;
      return Failure(std::move(submitted));
    }
    step_ids_.push_back(std::move(id));
  }
  return std::nullopt;
}

void BeamSearchRun::OnStepUpdate(int64_t step, size_t beam, RequestUpdate update) {
  // A queued step's beat shows the whole search alive; one beam's is enough.
  if (update.keep_alive) {
    if (beam == 0)
      done_(std::move(update));
    return;
  }
  std::optional<RequestUpdate> report;
  {
    base::MutexLock lock(&mu_);
    if (over_ || step != search_.steps())
      return;
    if (step == 0 && beam == 0)
      cached_tokens_ = update.num_cached_tokens;
    bool aborted = !update.error.ok();
    for (SequenceUpdate& seq : update.sequences) {
      if (!seq.logprobs.empty())
        step_results_[beam] = std::move(seq.logprobs.back());
      if (seq.finish_reason == FinishReason::kAbort || seq.finish_reason == FinishReason::kError)
        aborted = true;
    }
    if (update.finished && step_results_[beam].top_logprobs.empty())
      aborted = true;
    if (aborted) {
      over_ = true;
      for (const std::string& id : step_ids_)
        engine_->Abort(id);
      report = Failure(update.error.ok() ? absl::UnavailableError("a beam search step was aborted")
                                         : update.error);
    } else if (update.finished && --step_pending_ == 0) {
      search_.Step(step_results_);
      report = Advance();
    }
  }
  if (report.has_value())
    done_(*std::move(report));
}

std::optional<RequestUpdate> BeamSearchRun::Advance() {
  if (!search_.done())
    return SubmitStep();
  over_ = true;
  return Result();
}

RequestUpdate BeamSearchRun::Result() {
  RequestUpdate out;
  out.num_prompt_tokens = static_cast<int64_t>(prompt_.size());
  out.num_cached_tokens = cached_tokens_;
  out.finished = true;
  std::vector<Beam> best = search_.TakeBest();
  for (size_t i = 0; i < best.size(); ++i) {
    Beam& beam = best[i];
    SequenceUpdate& seq = out.sequences.emplace_back();
    seq.index = static_cast<int32_t>(i);
    // As vLLM: the whole text at once, special tokens kept, an ending EOS left out.
    std::span<const int32_t> text_tokens(beam.tokens);
    if (!options_.ignore_eos && !text_tokens.empty() && text_tokens.back() == options_.eos_token_id)
      text_tokens = text_tokens.first(text_tokens.size() - 1);
    seq.text = tokenizer_->Decode(text_tokens, false);
    if (result_logprobs_.has_value()) {
      for (SampleResult& lp : beam.logprobs) {
        if (lp.top_logprobs.size() > static_cast<size_t>(*result_logprobs_))
          lp.top_logprobs.resize(static_cast<size_t>(*result_logprobs_));
      }
      seq.logprobs = std::move(beam.logprobs);
    }
    seq.token_ids = std::move(beam.tokens);
    seq.finish_reason = beam.stopped ? FinishReason::kStop : FinishReason::kLength;
    if (beam.stopped && options_.eos_token_id.has_value())
      seq.stop_reason = *options_.eos_token_id;
  }
  return out;
}

RequestUpdate BeamSearchRun::Failure(absl::Status status) {
  RequestUpdate out;
  out.finished = true;
  out.error = std::move(status);
  return out;
}

}  // namespace switchyard::engine::internal
