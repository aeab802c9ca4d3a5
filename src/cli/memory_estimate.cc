#include "cli/memory_estimate.h"

#include "cli/tensor_groups.h"
#include "fmt/format.h"

#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "model/device_dtype.h"
#include "model/kv_cache_storage.h"
#include "model/llama_model.h"

namespace switchyard::cli {

namespace {

// Whether the engine passes a tensor of this group to PackMatMulWeights (model/weights.cc):
// the layers' matrices (each expert's alone) and the output head, which is the token
// embedding when the two are tied.
bool IsMatMulWeight(std::string_view group, bool tied) {
  return group == "attention q" || group == "attention k" || group == "attention v" ||
         group == "attention output" || group == "ffn gate" || group == "ffn up" ||
         group == "ffn down" || group == "output" || (tied && group == "token embedding");
}

// Bytes of the backend's copy of a matrix stored as `t`: per [m, k] matrix, a stack of
// experts being one per expert.
uint64_t PackedBytes(const runtime::Backend& backend, const model::TensorView& t) {
  const std::optional<runtime::DType> dtype = model::RuntimeDTypeOf(t.dtype);
  if (!dtype.has_value() || t.shape.size() < 2)
    return 0;
  int64_t matrices = 1;
  for (size_t i = 0; i + 2 < t.shape.size(); ++i)
    matrices *= t.shape[i];
  const int64_t m = t.shape[t.shape.size() - 2];
  const int64_t k = t.shape.back();
  return static_cast<uint64_t>(matrices) * backend.PackedMatMulWeightBytes(*dtype, m, k);
}

}  // namespace

absl::StatusOr<MemoryEstimate> EstimateMemory(const model::ModelFiles& files,
                                              const MemoryEstimateOptions& options,
                                              const runtime::Backend* backend) {
  const model::ModelConfig& c = files.config();
  MemoryEstimate m;
  m.max_model_len = options.max_model_len > 0 ? options.max_model_len : c.max_position_embeddings;
  m.block_size = options.block_size;
  if (options.max_model_len < 0 || m.block_size <= 0 ||
      m.max_model_len > c.max_position_embeddings) {
    return absl::InvalidArgumentError(fmt::format(
        "--max-model-len ({}) must be in [0, {}] (the model's context) and --block-size ({}) "
        "positive",
        options.max_model_len, c.max_position_embeddings, options.block_size));
  }
  // The engine picks the KV dtype by layer 0's Q projection as loaded (LlamaModel::KvShape).
  bool f32_layers = true;
  for (const model::TensorView& t : files.tensors()) {
    const TensorGroupOf g = ClassifyTensor(t.name);
    if (g.group == "attention q" && g.layer == 0)
      f32_layers = t.dtype == model::DType::kF32;
    m.weights_bytes += t.byte_size;
    if (backend != nullptr && IsMatMulWeight(g.group, c.tie_word_embeddings))
      m.packed_bytes += PackedBytes(*backend, t);
  }
  m.kv_dtype = model::DefaultKvDType(f32_layers);
  m.sliding_window = engine::SlidingWindowOf(c);
  m.kv_blocks = engine::MaxBlocksPerSequence(m.max_model_len, options.max_num_batched_tokens,
                                             m.sliding_window, m.block_size);
  m.kv_block_bytes = model::KvCacheBytes(model::KvShapeOf(c, 1, m.block_size, m.kv_dtype));
  m.kv_cache_bytes =
      model::KvCacheBytes(model::KvShapeOf(c, m.kv_blocks, m.block_size, m.kv_dtype));
  return m;
}

}  // namespace switchyard::cli
