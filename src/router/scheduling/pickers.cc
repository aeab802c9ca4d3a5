#include "router/scheduling/pickers.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace switchyard::router {
namespace {

// The first `k` candidates by descending key, ties in the order given.
Candidates TopByKey(const Candidates& candidates, const std::vector<double>& keys,
                    std::vector<size_t> order, int k) {
  std::stable_sort(order.begin(), order.end(),
                   [&keys](size_t a, size_t b) { return keys[a] > keys[b]; });
  Candidates out;
  const size_t n = std::min(order.size(), static_cast<size_t>(std::max(k, 1)));
  for (size_t i = 0; i < n; ++i)
    out.push_back(candidates[order[i]]);
  return out;
}

std::vector<size_t> ShuffledOrder(size_t n, std::mt19937_64& rng) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

}  // namespace

Candidates MaxScorePicker::Pick(CycleState&, const Candidates& candidates,
                                std::span<const double> scores, std::mt19937_64& rng) {
  if (max_endpoints_ <= 1) {
    // One pass: the best total, ties broken uniformly (the i-th tie seen replaces the pick
    // with probability 1/i).
    Candidates out;
    size_t best = 0;
    size_t ties = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (ties == 0 || scores[i] > scores[best]) {
        best = i;
        ties = 1;
      } else if (scores[i] == scores[best] &&
                 std::uniform_int_distribution<size_t>(0, ties++)(rng) == 0) {
        best = i;
      }
    }
    if (ties > 0)
      out.push_back(candidates[best]);
    return out;
  }
  // Shuffle, then a stable sort: equal totals end up in random order.
  std::vector<double> keys(scores.begin(), scores.end());
  return TopByKey(candidates, keys, ShuffledOrder(candidates.size(), rng), max_endpoints_);
}

Candidates RandomPicker::Pick(CycleState&, const Candidates& candidates, std::span<const double>,
                              std::mt19937_64& rng) {
  // The first n steps of a Fisher-Yates shuffle: a uniform sample in random order, without
  // shuffling (or allocating an order for) the rest.
  Candidates out = candidates;
  const size_t n = std::min(out.size(), static_cast<size_t>(std::max(max_endpoints_, 1)));
  for (size_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<size_t> rest(i, out.size() - 1);
    std::swap(out[i], out[rest(rng)]);
  }
  out.resize(n);
  return out;
}

Candidates WeightedRandomPicker::Pick(CycleState& cycle, const Candidates& candidates,
                                      std::span<const double> scores, std::mt19937_64& rng) {
  const bool any_positive =
      std::any_of(scores.begin(), scores.end(), [](double s) { return s > 0; });
  if (!any_positive)
    return RandomPicker(max_endpoints_).Pick(cycle, candidates, scores, rng);
  // A-Res (Efraimidis-Spirakis): key = U^(1/w); the k largest keys are a weighted sample
  // without replacement. Non-positive weights never win over positive ones.
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> keys(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double u = uniform(rng);
    keys[i] = scores[i] > 0 ? std::pow(u, 1.0 / scores[i]) : -1.0;
  }
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t{0});
  return TopByKey(candidates, keys, std::move(order), max_endpoints_);
}

Candidates RoundRobinPicker::Pick(CycleState&, const Candidates& candidates,
                                  std::span<const double>, std::mt19937_64&) {
  Candidates out;
  if (candidates.empty())
    return out;
  const size_t n = candidates.size();
  const size_t start = static_cast<size_t>(next_.fetch_add(1, std::memory_order_relaxed) % n);
  const size_t k = std::min(n, static_cast<size_t>(std::max(max_endpoints_, 1)));
  for (size_t i = 0; i < k; ++i)
    out.push_back(candidates[(start + i) % n]);
  return out;
}

}  // namespace switchyard::router
