// The names a Llama-family model's weights go by in a StepGraph: "embed", "final_norm",
// "lm_head" and "layers.<i>.<field>" after LayerWeights' fields ("layers.3.wq",
// "layers.0.q_norm"). The recorder binds weights by these names and a StepProgram finds
// them again by them.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"

#include "model/weights.h"
#include "runtime/tensor.h"

namespace switchyard::compile {

// Calls `visit` with every weight of a dense model (no experts) and its name, in a fixed
// order, stopping at the first error it returns. A tied lm_head comes as both "embed" and
// "lm_head" (one tensor).
absl::Status ForEachLlamaWeight(
    const model::LlamaWeights& weights,
    const std::function<absl::Status(const std::string& name, const runtime::Tensor& tensor)>&
        visit);

}  // namespace switchyard::compile
