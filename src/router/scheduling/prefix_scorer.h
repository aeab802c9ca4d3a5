// prefix-cache-scorer, as llm-d defines it (scorer/prefix/README.md):
//   score = w * min(1, matched_tokens / match_length_scale_tokens)^2
//         + (1 - w) * matched_blocks / total_blocks
// with w = matchLengthWeight (default 0: the plain ratio). Matches come from a PrefixIndex:
//   approximate  the router's own record of where it sent which prefixes (this plugin's
//                PreRequest adds the request's keys to the picked endpoint), trailing
//                partial block included, as llm-d's approx producer keys it;
//   precise      the index the engines' KV events feed (KvEventIndexer); full blocks only,
//                since engines publish only full blocks.
// Keys are computed from the request's prompt tokens with the plugin's block size; a
// request without tokens scores 0 everywhere. Thread-safe (the index locks).
#pragma once

#include <cstdint>

#include "router/prefix/prefix_index.h"
#include "router/scheduling/plugin.h"

namespace switchyard::router {

struct PrefixScorerOptions {
  bool precise = false;
  int32_t block_size = 16;
  size_t max_blocks = 8192;  // llm-d caps the match at maxPrefixTokensToMatch / block size
  double match_length_weight = 0;
  double match_length_scale_tokens = 8192;
};

class PrefixCacheScorer final : public Scorer, public PreRequest {
 public:
  // Borrows `index`.
  PrefixCacheScorer(PrefixIndex* index, const PrefixScorerOptions& options)
      : index_(index), options_(options) {}

  void Score(const SchedulingRequest& request, const Candidates& candidates,
             std::span<double> scores) override;
  // Approximate mode only: records the request's keys on the picked endpoint.
  void OnPicked(const SchedulingRequest& request, const Endpoint& picked) override;

 private:
  std::vector<uint64_t> Keys(const SchedulingRequest& request) const;

  PrefixIndex* const index_;
  const PrefixScorerOptions options_;
};

}  // namespace switchyard::router
