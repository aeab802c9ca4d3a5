// RecordLlamaStep: the StepGraph of one step of a Llama-family model (model/llama_graph.h's
// Step, the code eager mode runs) for one shape bucket, recorded on a GraphRecorder.
//
// Weights are values named by their place in the model ("embed", "layers.3.wq", "lm_head";
// a tied lm_head is "embed"); the step inputs are "tokens", "positions", "slots" and "rows";
// the activation buffers are named as model::Activations names them ("x", "h", "logits"...);
// each layer's KV pools are "k_pool.L" and "v_pool.L".
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

#include "compile/step_graph.h"
#include "compile/step_program.h"
#include "model/kv_cache_storage.h"
#include "model/weights.h"
#include "runtime/dtype.h"

namespace switchyard::compile {

// A step's static shape: tokens in the step and rows that want logits.
struct StepBucket {
  int64_t tokens = 1;
  int64_t logit_rows = 1;
};

// Unimplemented for a mixture-of-experts model (its layers read their routing back to the
// host mid-step: it runs eagerly); InvalidArgument for a bucket with no tokens, or more logit rows
// than tokens.
absl::StatusOr<StepGraph> RecordLlamaStep(const model::LlamaWeights& weights,
                                          runtime::DType kv_dtype, int64_t block_size,
                                          StepBucket bucket);

// Resolves the weights and KV pools of a graph RecordLlamaStep made to `weights` and `kv`
// (both borrowed: they must outlive the resolver and the programs bound with it).
ExternalResolver ResolveLlamaExternals(const model::LlamaWeights& weights,
                                       const model::KvCacheStorage& kv);

}  // namespace switchyard::compile
