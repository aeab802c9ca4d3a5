// vLLM's (V0) best_of selection: of the sequences generated for one prompt, the n whose
// cumulative logprob (the sum of their sampled tokens' logprobs) is highest are answered,
// best first. A pure function; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace switchyard::engine {

// The indexes into `cumulative_logprobs` of its min(n, size) highest values, highest first;
// ties keep the lower index first (as Python's stable sort); NaN counts as -inf.
std::vector<int32_t> SelectBestOf(std::span<const double> cumulative_logprobs, int32_t n);

}  // namespace switchyard::engine
