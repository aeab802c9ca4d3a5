// Tensor groups of a Llama-family checkpoint for `switchyard model inspect`: which part of the
// model each tensor is (token embedding, attention q/k/v/output, FFN gate/up/down, norms,
// output, ...), by its name in Hugging Face or GGUF (llama.cpp) spelling, and per group the
// tensors, parameters and bytes of each dtype, so a quantisation that mixes types (Q4_K_M
// keeps some matrices in Q6_K) shows where each type went. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/tensor_view.h"

namespace switchyard::cli {

struct TensorGroupOf {
  std::string_view group;  // e.g. "attention q"; "other" for names no rule knows
  int64_t layer = -1;      // N of "blk.N." / "model.layers.N."; -1 outside the layers
};

TensorGroupOf ClassifyTensor(std::string_view name);

struct DTypeStats {
  int64_t tensors = 0;
  uint64_t bytes = 0;
};

struct TensorGroup {
  std::string_view group;
  int64_t tensors = 0;
  int64_t parameters = 0;
  uint64_t bytes = 0;
  std::map<std::string, DTypeStats> dtypes;  // by dtype name
};

// The groups that have tensors, in the model's order (embedding, attention, FFN, norms,
// output, then the rest).
std::vector<TensorGroup> GroupTensors(const std::vector<model::TensorView>& tensors);

}  // namespace switchyard::cli
