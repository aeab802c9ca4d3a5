#include "router/scheduling/prefix_plugins.h"

#include <algorithm>
#include <limits>

#include <xxhash.h>

#include "router/prefix/block_keys.h"

namespace switchyard::router {

const std::vector<uint64_t>& PrefixMatcher::Keys(const SchedulingRequest& request,
                                                 CycleState& cycle) const {
  for (const CycleState::PrefixKeys& cached : cycle.prefix_keys) {
    if (cached.block_size == options_.block_size && cached.precise == options_.precise &&
        cached.tokens.data() == request.prompt_tokens.data() &&
        cached.tokens.size() == request.prompt_tokens.size() && cached.model == request.model &&
        cached.cache_salt == request.cache_salt) {
      return cached.keys;
    }
  }
  // Precise keys must equal the ones KvEventIndexer derives from events, which carry no
  // cache_salt: the salt stays out of them (engines still isolate salted blocks).
  cycle.prefix_keys.push_back(
      {request.prompt_tokens, request.model, request.cache_salt, options_.block_size,
       options_.precise,
       BlockKeys(PrefixSeed(request.model, options_.precise ? "" : request.cache_salt),
                 request.prompt_tokens, options_.block_size, !options_.precise,
                 options_.max_blocks)});
  return cycle.prefix_keys.back().keys;
}

std::vector<CandidateMatch> PrefixMatcher::Matches(std::span<const uint64_t> keys,
                                                   const Candidates& candidates) const {
  std::vector<CandidateMatch> out(candidates.size());
  if (keys.empty())
    return out;
  const std::vector<PrefixIndex::EndpointMatch> matches =
      index_->Match(keys, options_.tier_weights);
  if (matches.empty())
    return out;
  auto match = [](const PrefixIndex::EndpointMatch& m) {
    return CandidateMatch{m.blocks, m.weighted_blocks, m.pool_blocks};
  };
  // A few candidates are found by a scan; a fleet by a map of their names.
  constexpr size_t kScanAtMost = 16;
  if (candidates.size() <= kScanAtMost) {
    for (const PrefixIndex::EndpointMatch& m : matches) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (candidates[i]->name == m.endpoint)
          out[i] = match(m);
      }
    }
    return out;
  }
  absl::flat_hash_map<std::string_view, size_t> slot;
  for (size_t i = 0; i < candidates.size(); ++i)
    slot[candidates[i]->name] = i;
  for (const PrefixIndex::EndpointMatch& m : matches) {
    auto it = slot.find(m.endpoint);
    if (it != slot.end())
      out[it->second] = match(m);
  }
  return out;
}

void PrefixMatcher::Record(const SchedulingRequest& request, CycleState& cycle,
                           const Endpoint& picked) {
  if (options_.precise)
    return;
  const std::vector<uint64_t>& keys = Keys(request, cycle);
  index_->Add(picked.name, keys);
  if (SchedulingObserver* observer = observers_ == nullptr ? nullptr : observers_->get())
    observer->PrefixLearned(picked.name, keys);
}

namespace {

// Approximate mode: a prefix no candidate holds gets a score this small on each candidate,
// from a rendezvous hash of its first key and the candidate's name: where the load scorers
// tie, every router replica places the new prefix on the same endpoint, even before they
// share what they learnt (replicas that placed it apart would both keep using both
// placements, since picks are what the index learns). Precise mode learns from the engines'
// KV events, which every replica sees alike: there, ties stay llm-d's random.
constexpr double kPlacementTieBreak = 1e-6;

double PlacementTieBreak(uint64_t first_key, const std::string& endpoint) {
  const uint64_t h = XXH3_64bits_withSeed(endpoint.data(), endpoint.size(), first_key);
  return kPlacementTieBreak * static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace

void PrefixCacheScorer::Score(const SchedulingRequest& request, CycleState& cycle,
                              const Candidates& candidates, std::span<double> scores) {
  std::fill(scores.begin(), scores.end(), 0.0);
  PrefixMatch& prediction = cycle.prefix_match.emplace();
  prediction.prompt_tokens = static_cast<int64_t>(request.prompt_tokens.size());
  const std::vector<uint64_t>& keys = matcher_.Keys(request, cycle);
  if (keys.empty())
    return;
  const std::vector<CandidateMatch> matched = matcher_.Matches(keys, candidates);
  if (!matcher_.options().precise &&
      std::all_of(matched.begin(), matched.end(),
                  [](const CandidateMatch& m) { return m.blocks == 0; })) {
    for (size_t i = 0; i < candidates.size(); ++i)
      scores[i] = PlacementTieBreak(keys.front(), candidates[i]->name);
    return;
  }
  const double w = options_.match_length_weight;
  const int64_t block_size = matcher_.options().block_size;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double weighted = matched[i].weighted_blocks;
    const double ratio = weighted / static_cast<double>(keys.size());
    const double tokens = weighted * static_cast<double>(block_size);
    const double length = std::min(1.0, tokens / options_.match_length_scale_tokens);
    scores[i] = w * length * length + (1 - w) * ratio;
    if (matched[i].blocks > 0) {
      // Approximate keys include the trailing partial block: cap at the prompt.
      auto to_tokens = [&](size_t blocks) {
        return std::min(prediction.prompt_tokens, static_cast<int64_t>(blocks) * block_size);
      };
      prediction.cached.push_back(
          {candidates[i]->name, to_tokens(matched[i].blocks), to_tokens(matched[i].pool_blocks)});
    }
  }
}

double PrefixCacheAffinityFilter::TtftMs(const Endpoint& e) const {
  return static_cast<double>(e.inflight_prompt_tokens()) / options_.peak_prefill_tokens_per_s *
         1000.0;
}

Candidates PrefixCacheAffinityFilter::Apply(const SchedulingRequest& request, CycleState& cycle,
                                            const Candidates& candidates) {
  if (options_.exploration_probability > 0) {
    base::MutexLock lock(&mu_);
    if (std::uniform_real_distribution<double>(0, 1)(rng_) < options_.exploration_probability)
      return candidates;
  }
  const std::vector<uint64_t>& keys = matcher_.Keys(request, cycle);
  if (keys.empty())
    return candidates;
  const std::vector<CandidateMatch> matched = matcher_.Matches(keys, candidates);
  Candidates sticky;
  double best_sticky = std::numeric_limits<double>::infinity();
  double best_other = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double ratio = static_cast<double>(matched[i].blocks) / static_cast<double>(keys.size());
    const double ttft = TtftMs(*candidates[i]);
    if (ratio >= options_.affinity_threshold) {
      sticky.push_back(candidates[i]);
      best_sticky = std::min(best_sticky, ttft);
    } else {
      best_other = std::min(best_other, ttft);
    }
  }
  if (sticky.empty())
    return candidates;
  // The load gate: stickiness is worth a bounded wait.
  if (options_.max_ttft_penalty_ms > 0 && best_other < std::numeric_limits<double>::infinity() &&
      best_sticky - best_other > options_.max_ttft_penalty_ms) {
    return candidates;
  }
  return sticky;
}

void NoHitLruScorer::Score(const SchedulingRequest& request, CycleState& cycle,
                           const Candidates& candidates, std::span<double> scores) {
  const std::vector<uint64_t>& keys = matcher_.Keys(request, cycle);
  const std::vector<CandidateMatch> matched = matcher_.Matches(keys, candidates);
  const bool cold = std::all_of(matched.begin(), matched.end(),
                                [](const CandidateMatch& m) { return m.blocks == 0; });
  cycle.cold_prefix = cold;
  if (!cold) {
    std::fill(scores.begin(), scores.end(), 0.5);
    return;
  }
  base::MutexLock lock(&mu_);
  // Rank among the candidates by recency: never used first (1), then least recent.
  const double n = static_cast<double>(lru_.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto it = where_.find(candidates[i]->name);
    if (it == where_.end()) {
      scores[i] = 1.0;
      continue;
    }
    const auto rank = static_cast<double>(std::distance(lru_.begin(), it->second));
    scores[i] = n > 0 ? 1.0 - (rank + 1) / (n + 1) : 1.0;
  }
}

void NoHitLruScorer::OnPicked(const SchedulingRequest&, CycleState& cycle, const Endpoint& picked) {
  if (!cycle.cold_prefix.value_or(false))
    return;
  base::MutexLock lock(&mu_);
  auto it = where_.find(picked.name);
  if (it != where_.end()) {
    lru_.splice(lru_.end(), lru_, it->second);
    return;
  }
  lru_.push_back(picked.name);
  where_[picked.name] = std::prev(lru_.end());
  while (lru_.size() > lru_size_) {
    where_.erase(lru_.front());
    lru_.pop_front();
  }
}

}  // namespace switchyard::router
