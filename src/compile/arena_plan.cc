#include "compile/arena_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

namespace switchyard::compile {
namespace {

struct Live {
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  bool Overlaps(const Live& o) const { return first <= o.last && o.first <= last; }
};

size_t Aligned(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

}  // namespace

ArenaPlan PlanArena(const StepGraph& graph, std::span<const std::string_view> outputs) {
  const size_t count = graph.values.size();
  std::vector<Live> live(count);
  const auto touch = [&live](const TensorRef& ref, int64_t node) {
    if (!ref.present())
      return;
    Live& l = live[static_cast<size_t>(ref.value)];
    l.first = std::min(l.first, node);
    l.last = std::max(l.last, node);
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (const TensorRef& ref : graph.nodes[i].inputs)
      touch(ref, static_cast<int64_t>(i));
    for (const TensorRef& ref : graph.nodes[i].outputs)
      touch(ref, static_cast<int64_t>(i));
  }
  const auto end = static_cast<int64_t>(graph.nodes.size());
  for (size_t v = 0; v < count; ++v) {
    Live& l = live[v];
    if (l.first > l.last)
      l = {-1, -1};  // touched by no node: a slot of its own at the start
    if (graph.values[v].kind == ValueKind::kInput)
      l.first = -1;
  }
  for (std::string_view name : outputs) {
    const int32_t v = graph.Find(name);
    if (v >= 0)
      live[static_cast<size_t>(v)].last = end;
  }

  ArenaPlan plan;
  plan.offsets.assign(count, std::nullopt);
  std::vector<size_t> order;
  for (size_t v = 0; v < count; ++v) {
    const ValueKind kind = graph.values[v].kind;
    if (kind == ValueKind::kInput || kind == ValueKind::kActivation)
      order.push_back(v);
  }
  // Largest first, each at the lowest offset clear of every placed value it is live with.
  std::stable_sort(order.begin(), order.end(), [&graph](size_t a, size_t b) {
    return graph.values[a].size_bytes > graph.values[b].size_bytes;
  });
  std::vector<size_t> placed;
  for (size_t v : order) {
    const size_t size = Aligned(graph.values[v].size_bytes);
    std::vector<std::pair<size_t, size_t>> taken;  // [begin, end) of live neighbours
    for (size_t p : placed) {
      if (live[p].Overlaps(live[v]))
        taken.emplace_back(*plan.offsets[p],
                           *plan.offsets[p] + Aligned(graph.values[p].size_bytes));
    }
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& [begin, stop] : taken) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, stop);
    }
    plan.offsets[v] = offset;
    plan.size_bytes = std::max(plan.size_bytes, offset + size);
    placed.push_back(v);
  }
  return plan;
}

}  // namespace switchyard::compile
