#include "cli/memory_estimate.h"

#include "cli/tensor_groups.h"
#include "fmt/format.h"

#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "model/kv_cache_storage.h"
#include "model/llama_model.h"

namespace switchyard::cli {

absl::StatusOr<MemoryEstimate> EstimateMemory(const model::ModelFiles& files,
                                              const MemoryEstimateOptions& options) {
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
