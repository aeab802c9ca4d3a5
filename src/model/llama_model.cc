#include "model/llama_model.h"

#include <string>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "model/llama_graph.h"

namespace switchyard::model {

LlamaModel::LlamaModel(runtime::Backend* backend, const LlamaModelOptions& options)
    : backend_(backend), options_(options) {}

LlamaModel::~LlamaModel() = default;

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const ModelFiles& files,
                                                               runtime::Backend* backend,
                                                               const LlamaModelOptions& options) {
  if (options.max_num_batched_tokens <= 0 || options.max_logit_rows <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("max_num_batched_tokens ({}) and max_logit_rows ({}) must be positive",
                    options.max_num_batched_tokens, options.max_logit_rows));
  }
  auto model = std::unique_ptr<LlamaModel>(new LlamaModel(backend, options));
  SY_ASSIGN_OR_RETURN(model->weights_, LoadLlamaWeights(files, backend, options.weight_dtype));
  SY_ASSIGN_OR_RETURN(model->rope_, backend->CreateRopeTable(model->weights_->rope));
  if (model->weights_->local_rope.has_value()) {
    SY_ASSIGN_OR_RETURN(model->local_rope_, backend->CreateRopeTable(*model->weights_->local_rope));
  }
  SY_ASSIGN_OR_RETURN(model->act_,
                      AllocateActivations(backend, model->config(), options.max_num_batched_tokens,
                                          options.max_logit_rows));
  return model;
}

runtime::DType DefaultKvDType(bool f32_layer_weights) {
  return f32_layer_weights ? runtime::DType::kF32 : runtime::DType::kF16;
}

KvCacheShape LlamaModel::KvShape(int64_t num_blocks, int64_t block_size) const {
  const bool f32_layers =
      weights_->layers.empty() || weights_->layers.front().wq.dtype() == runtime::DType::kF32;
  return KvShapeOf(config(), num_blocks, block_size,
                   options_.kv_dtype.value_or(DefaultKvDType(f32_layers)));
}

absl::Status LlamaModel::CheckBatch(const ForwardBatch& batch, const KvCacheStorage& kv) const {
  const size_t n = batch.tokens.size();
  if (n == 0 || static_cast<int64_t>(n) > options_.max_num_batched_tokens) {
    return absl::InvalidArgumentError(fmt::format("forward: {} tokens; a step takes 1 to {}", n,
                                                  options_.max_num_batched_tokens));
  }
  if (batch.positions.size() != n || batch.slot_ids.size() != n) {
    return absl::InvalidArgumentError(
        fmt::format("forward: {} tokens but {} positions and {} slot ids", n,
                    batch.positions.size(), batch.slot_ids.size()));
  }
  const size_t r = batch.logit_rows.size();
  if (static_cast<int64_t>(r) > options_.max_logit_rows) {
    return absl::InvalidArgumentError(
        fmt::format("forward: {} logit rows; a step takes at most {}", r, options_.max_logit_rows));
  }
  for (int32_t row : batch.logit_rows) {
    if (row < 0 || static_cast<size_t>(row) >= n) {
      return absl::OutOfRangeError(
          fmt::format("forward: logit row {} is outside the batch's {} tokens", row, n));
    }
  }
  for (int32_t p : batch.positions) {
    if (p < 0) {
      return absl::OutOfRangeError(fmt::format("forward: negative position {}", p));
    }
  }
  const KvCacheShape expected = KvShape(kv.shape().num_blocks, kv.shape().block_size);
  if (kv.shape().num_layers != expected.num_layers || kv.shape().kv_heads != expected.kv_heads ||
      kv.shape().head_dim != expected.head_dim) {
    return absl::InvalidArgumentError(fmt::format(
        "forward: KV cache has {} layers x {} kv heads x {} dims; the model needs {} x {} x {}",
        kv.shape().num_layers, kv.shape().kv_heads, kv.shape().head_dim, expected.num_layers,
        expected.kv_heads, expected.head_dim));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::Forward(const ForwardBatch& batch, const KvCacheStorage& kv,
                                 std::span<float> logits) {
  SY_RETURN_IF_ERROR(CheckBatch(batch, kv));
  const auto n = static_cast<int64_t>(batch.tokens.size());
  const auto r = static_cast<int64_t>(batch.logit_rows.size());
  const auto vocab = config().vocab_size;
  if (logits.size() != static_cast<size_t>(r * vocab)) {
    return absl::InvalidArgumentError(
        fmt::format("forward: logits span holds {} floats, {} rows x {} vocab need {}",
                    logits.size(), r, vocab, r * vocab));
  }
  Activations* a = act_.get();
  SY_RETURN_IF_ERROR(backend_->CopyToDevice(batch.tokens.data(), a->tokens.Slice(0, n)));
  SY_RETURN_IF_ERROR(backend_->CopyToDevice(batch.positions.data(), a->positions.Slice(0, n)));
  SY_RETURN_IF_ERROR(backend_->CopyToDevice(batch.slot_ids.data(), a->slots.Slice(0, n)));
  if (r > 0)
    SY_RETURN_IF_ERROR(backend_->CopyToDevice(batch.logit_rows.data(), a->rows.Slice(0, r)));

  const StepViews step{n, r, batch.sequences};
  SY_RETURN_IF_ERROR(Step(backend_, *weights_, {rope_.get(), local_rope_.get()}, kv, step, a));
  if (r == 0)
    return backend_->Synchronize();
  return backend_->CopyToHost(a->logits.Slice(0, r), logits.data());
}

}  // namespace switchyard::model
