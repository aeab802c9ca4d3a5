#include "router/scheduling/prefix_scorer.h"

#include <algorithm>

#include "router/prefix/block_keys.h"

namespace switchyard::router {

std::vector<uint64_t> PrefixCacheScorer::Keys(const SchedulingRequest& request) const {
  return BlockKeys(PrefixSeed(request.model, options_.precise ? "" : request.cache_salt),
                   request.prompt_tokens, options_.block_size, !options_.precise,
                   options_.max_blocks);
}

void PrefixCacheScorer::Score(const SchedulingRequest& request, const Candidates& candidates,
                              std::span<double> scores) {
  std::fill(scores.begin(), scores.end(), 0.0);
  const std::vector<uint64_t> keys = Keys(request);
  if (keys.empty())
    return;
  const std::vector<PrefixIndex::EndpointMatch> matches = index_->Match(keys);
  const double w = options_.match_length_weight;
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (const PrefixIndex::EndpointMatch& m : matches) {
      if (m.endpoint != candidates[i]->name)
        continue;
      const double ratio = static_cast<double>(m.blocks) / static_cast<double>(keys.size());
      const double tokens = static_cast<double>(m.blocks) * options_.block_size;
      const double length = std::min(1.0, tokens / options_.match_length_scale_tokens);
      scores[i] = w * length * length + (1 - w) * ratio;
      break;
    }
  }
}

void PrefixCacheScorer::OnPicked(const SchedulingRequest& request, const Endpoint& picked) {
  if (options_.precise)
    return;
  index_->Add(picked.name, Keys(request));
}

}  // namespace switchyard::router
