#include "compile/record_llama_step.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "compile/graph_recorder.h"
#include "compile/llama_weight_names.h"
#include "model/kv_cache_storage.h"
#include "model/llama_graph.h"

namespace switchyard::compile {
namespace {

absl::Status NameActivations(GraphRecorder* r, const model::Activations& a) {
  for (const auto& [name, tensor] : {std::pair{"tokens", &a.tokens},
                                     {"positions", &a.positions},
                                     {"slots", &a.slots},
                                     {"rows", &a.rows}}) {
    SY_RETURN_IF_ERROR(r->Name(*tensor, ValueKind::kInput, name));
  }
  for (const auto& [name, tensor] : {std::pair{"x", &a.x},
                                     {"h", &a.h},
                                     {"q", &a.q},
                                     {"k", &a.k},
                                     {"v", &a.v},
                                     {"attn", &a.attn},
                                     {"proj", &a.proj},
                                     {"gate", &a.gate},
                                     {"up", &a.up},
                                     {"last", &a.last},
                                     {"logits", &a.logits}}) {
    SY_RETURN_IF_ERROR(r->Name(*tensor, ValueKind::kActivation, name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StepGraph> RecordLlamaStep(const model::LlamaWeights& weights,
                                          runtime::DType kv_dtype, int64_t block_size,
                                          StepBucket bucket) {
  if (bucket.tokens <= 0 || bucket.logit_rows < 0 || bucket.logit_rows > bucket.tokens) {
    return absl::InvalidArgumentError(
        fmt::format("a step bucket of {} tokens and {} logit rows: want 0 <= rows <= tokens > 0",
                    bucket.tokens, bucket.logit_rows));
  }
  if (weights.config.num_experts > 0) {
    return absl::UnimplementedError(
        "a mixture-of-experts step reads its routing back to the host mid-step: it is not "
        "recordable and runs eagerly");
  }
  SY_ASSIGN_OR_RETURN(std::unique_ptr<GraphRecorder> recorder, GraphRecorder::Create());
  SY_RETURN_IF_ERROR(ForEachLlamaWeight(
      weights, [&recorder](const std::string& name, const runtime::Tensor& tensor) {
        return recorder->Bind(ValueKind::kWeight, name, tensor);
      }));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::RopeTable> global,
                      recorder->CreateRopeTable(weights.rope));
  std::unique_ptr<runtime::RopeTable> local;
  if (weights.local_rope.has_value()) {
    SY_ASSIGN_OR_RETURN(local, recorder->CreateRopeTable(*weights.local_rope));
  }
  const model::ModelConfig& config = weights.config;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::Activations> a,
                      model::AllocateActivations(recorder.get(), config, bucket.tokens,
                                                 std::max<int64_t>(1, bucket.logit_rows)));
  SY_RETURN_IF_ERROR(NameActivations(recorder.get(), *a));
  // One block: a pool's block count is the engine's, not part of the graph.
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::KvCacheStorage> kv,
                      model::KvCacheStorage::Create(
                          recorder.get(), model::KvShapeOf(config, 1, block_size, kv_dtype)));
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    SY_RETURN_IF_ERROR(
        recorder->Name(kv->k_pool(layer), ValueKind::kKvPool, fmt::format("k_pool.{}", layer)));
    SY_RETURN_IF_ERROR(
        recorder->Name(kv->v_pool(layer), ValueKind::kKvPool, fmt::format("v_pool.{}", layer)));
  }
  const model::StepViews step{bucket.tokens, bucket.logit_rows, {}};
  SY_RETURN_IF_ERROR(
      model::Step(recorder.get(), weights, {global.get(), local.get()}, *kv, step, a.get()));
  return recorder->graph();
}

ExternalResolver ResolveLlamaExternals(const model::LlamaWeights& weights,
                                       const model::KvCacheStorage& kv) {
  return [&weights, &kv](const GraphValue& value) -> absl::StatusOr<runtime::Tensor> {
    if (value.kind == ValueKind::kKvPool) {
      for (int64_t layer = 0; layer < kv.shape().num_layers; ++layer) {
        if (value.name == fmt::format("k_pool.{}", layer))
          return kv.k_pool(layer);
        if (value.name == fmt::format("v_pool.{}", layer))
          return kv.v_pool(layer);
      }
    } else if (value.kind == ValueKind::kWeight) {
      std::optional<runtime::Tensor> found;
      SY_RETURN_IF_ERROR(
          ForEachLlamaWeight(weights, [&](const std::string& name, const runtime::Tensor& tensor) {
            if (name == value.name && !found.has_value())
              found = tensor;
            return absl::OkStatus();
          }));
      if (found.has_value())
        return *found;
    }
    return absl::NotFoundError(
        fmt::format("the model has no {} named {}", ValueKindName(value.kind), value.name));
  };
}

}  // namespace switchyard::compile
