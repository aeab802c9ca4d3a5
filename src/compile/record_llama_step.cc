#include "compile/record_llama_step.h"

#include <algorithm>
#include <map>
#include <memory>
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
  // Every name once, so binding a graph costs one lookup per value. A tied lm_head keeps
  // its first name's tensor (the same one).
  auto named = std::make_shared<std::map<std::string, runtime::Tensor, std::less<>>>();
  const absl::Status walked =
      ForEachLlamaWeight(weights, [&named](const std::string& name, const runtime::Tensor& t) {
        named->emplace(name, t);
        return absl::OkStatus();
      });
  for (int64_t layer = 0; layer < kv.shape().num_layers; ++layer) {
    named->emplace(fmt::format("k_pool.{}", layer), kv.k_pool(layer));
    named->emplace(fmt::format("v_pool.{}", layer), kv.v_pool(layer));
  }
  return [named, walked](const GraphValue& value) -> absl::StatusOr<runtime::Tensor> {
    SY_RETURN_IF_ERROR(walked);
    const auto found = named->find(value.name);
    const bool pool = value.name.starts_with("k_pool.") || value.name.starts_with("v_pool.");
    if (found == named->end() || pool != (value.kind == ValueKind::kKvPool) ||
        (!pool && value.kind != ValueKind::kWeight)) {
      return absl::NotFoundError(
          fmt::format("the model has no {} named {}", ValueKindName(value.kind), value.name));
    }
    return found->second;
  };
}

}  // namespace switchyard::compile
