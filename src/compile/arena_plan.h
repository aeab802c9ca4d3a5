// ArenaPlan: the static memory plan of a StepGraph. Every input and activation value gets a
// byte offset in one arena, fixed when the step is compiled; two values share bytes only
// when no node touches both while both are live. A value is live from the first node that
// touches it to the last; inputs from before the first node (the caller writes them), the
// values named as outputs until after the last (the caller reads them).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "compile/step_graph.h"

namespace switchyard::compile {

inline constexpr size_t kArenaAlignment = 64;

struct ArenaPlan {
  // Per graph value: its offset, or nullopt for a weight or KV pool (not in the arena).
  std::vector<std::optional<size_t>> offsets;
  size_t size_bytes = 0;
};

// `outputs`: names of the values read after the step (e.g. "logits"); unknown names are
// ignored. Offsets are multiples of kArenaAlignment.
ArenaPlan PlanArena(const StepGraph& graph, std::span<const std::string_view> outputs);

}  // namespace switchyard::compile
