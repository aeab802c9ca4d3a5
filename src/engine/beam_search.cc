#include "engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace switchyard::engine {
namespace {

// One way to extend a live beam: its `rank`-th most likely next token.
struct Candidate {
  double cum_logprob = 0;
  size_t beam = 0;
  size_t rank = 0;
};

// The beam extended by candidate `rank` of `next`; `keep_token` false drops the token (an EOS
// that ends the beam) but still counts its logprob.
Beam Extend(const Beam& beam, const SampleResult& next, size_t rank, bool keep_token) {
  Beam out = beam;
  out.cum_logprob += next.top_logprobs[rank].logprob;
  if (keep_token) {
    const TokenLogprob& chosen = next.top_logprobs[rank];
    out.tokens.push_back(chosen.token);
    SampleResult& lp = out.logprobs.emplace_back();
    lp.token = chosen.token;
    lp.logprob = chosen.logprob;
    lp.rank = static_cast<int32_t>(rank) + 1;
    lp.top_logprobs = next.top_logprobs;
  }
  return out;
}

}  // namespace

double BeamSearchScore(const Beam& beam, int64_t prompt_tokens, const BeamSearchOptions& options) {
  int64_t seq_len = prompt_tokens + static_cast<int64_t>(beam.tokens.size());
  if (!beam.tokens.empty() && beam.tokens.back() == options.eos_token_id)
    --seq_len;
  return beam.cum_logprob / std::pow(static_cast<double>(seq_len), options.length_penalty);
}

BeamSearch::BeamSearch(BeamSearchOptions options, int64_t prompt_tokens)
    : options_(options), prompt_tokens_(prompt_tokens), live_(1) {}

void BeamSearch::Step(std::span<const SampleResult> next) {
  const bool eos_stops = options_.eos_token_id.has_value() && !options_.ignore_eos;
  std::vector<Candidate> candidates;
  for (size_t b = 0; b < live_.size(); ++b) {
    const std::vector<TokenLogprob>& top = next[b].top_logprobs;
    for (size_t r = 0; r < top.size(); ++r) {
      if (eos_stops && top[r].token == *options_.eos_token_id) {
        Beam done = Extend(live_[b], next[b], r, options_.include_stop_str_in_output);
        done.stopped = true;
        completed_.push_back(std::move(done));
        continue;
      }
      candidates.push_back({live_[b].cum_logprob + top[r].logprob, b, r});
    }
  }
  const size_t keep = std::min(candidates.size(), static_cast<size_t>(options_.beam_width));
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.cum_logprob > b.cum_logprob; });
  std::vector<Beam> next_live;
  next_live.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    const Candidate& c = candidates[i];
    next_live.push_back(Extend(live_[c.beam], next[c.beam], c.rank, true));
  }
  live_ = std::move(next_live);
  ++steps_;
}

std::vector<Beam> BeamSearch::TakeBest() {
  std::vector<Beam> all = std::move(completed_);
  for (Beam& beam : live_)
    all.push_back(std::move(beam));
  live_.clear();
  completed_.clear();
  std::vector<std::pair<double, size_t>> order;
  order.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i)
    order.emplace_back(BeamSearchScore(all[i], prompt_tokens_, options_), i);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Beam> best;
  const size_t keep = std::min(order.size(), static_cast<size_t>(options_.beam_width));
  best.reserve(keep);
  for (size_t i = 0; i < keep; ++i)
    best.push_back(std::move(all[order[i].second]));
  return best;
}

}  // namespace switchyard::engine
