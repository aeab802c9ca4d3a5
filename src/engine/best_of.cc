#include "engine/best_of.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace switchyard::engine {

std::vector<int32_t> SelectBestOf(std::span<const double> cumulative_logprobs, int32_t n) {
  std::vector<int32_t> order(cumulative_logprobs.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) {
    const double v = cumulative_logprobs[static_cast<size_t>(i)];
    return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  order.resize(std::min(order.size(), static_cast<size_t>(std::max(n, 0))));
  return order;
}

}  // namespace switchyard::engine
