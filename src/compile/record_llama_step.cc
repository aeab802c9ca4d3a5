#include "compile/record_llama_step.h"

#include <algorithm>
#include <memory>
#include <string>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "compile/graph_recorder.h"
#include "model/kv_cache_storage.h"
#include "model/llama_graph.h"

namespace switchyard::compile {
namespace {

absl::Status BindOptional(GraphRecorder* r, const std::string& name,
                          const std::optional<runtime::Tensor>& t) {
  return t.has_value() ? r->Bind(ValueKind::kWeight, name, *t) : absl::OkStatus();
}

// Every weight of a dense model under its place in it.
absl::Status BindWeights(GraphRecorder* r, const model::LlamaWeights& w) {
  SY_RETURN_IF_ERROR(r->Bind(ValueKind::kWeight, "embed", w.embed));
  SY_RETURN_IF_ERROR(r->Bind(ValueKind::kWeight, "final_norm", w.final_norm));
  SY_RETURN_IF_ERROR(r->Bind(ValueKind::kWeight, "lm_head", w.lm_head));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const model::LayerWeights& l = w.layers[i];
    const auto name = [i](std::string_view field) { return fmt::format("layers.{}.{}", i, field); };
    for (const auto& [field, tensor] : {std::pair{"attn_norm", &l.attn_norm},
                                        {"wq", &l.wq},
                                        {"wk", &l.wk},
                                        {"wv", &l.wv},
                                        {"wo", &l.wo},
                                        {"ffn_norm", &l.ffn_norm},
                                        {"w_gate", &l.w_gate},
                                        {"w_up", &l.w_up},
                                        {"w_down", &l.w_down}}) {
      SY_RETURN_IF_ERROR(r->Bind(ValueKind::kWeight, name(field), *tensor));
    }
    for (const auto& [field, tensor] : {std::pair{"bq", &l.bq},
                                        {"bk", &l.bk},
                                        {"bv", &l.bv},
                                        {"q_norm", &l.q_norm},
                                        {"k_norm", &l.k_norm},
                                        {"post_attn_norm", &l.post_attn_norm},
                                        {"post_ffn_norm", &l.post_ffn_norm}}) {
      SY_RETURN_IF_ERROR(BindOptional(r, name(field), *tensor));
    }
  }
  return absl::OkStatus();
}

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
  SY_RETURN_IF_ERROR(BindWeights(recorder.get(), weights));
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

}  // namespace switchyard::compile
