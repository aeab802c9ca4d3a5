#include "model/kv_cache_storage.h"

#include <string>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "runtime/dtype.h"

namespace switchyard::model {

KvCacheShape KvShapeOf(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
                       runtime::DType dtype) {
  KvCacheShape shape;
  shape.num_layers = config.num_hidden_layers;
  shape.num_blocks = num_blocks;
  shape.block_size = block_size;
  shape.kv_heads = config.num_key_value_heads;
  shape.head_dim = config.head_dim;
  shape.dtype = dtype;
  return shape;
}

size_t KvPoolBytes(const KvCacheShape& shape) {
  return static_cast<size_t>(shape.num_blocks * shape.block_size * shape.kv_heads) *
         runtime::RowBytes(shape.dtype, shape.head_dim);
}

size_t KvCacheBytes(const KvCacheShape& shape) {
  return 2 * static_cast<size_t>(shape.num_layers) * KvPoolBytes(shape);
}

absl::StatusOr<std::unique_ptr<KvCacheStorage>> KvCacheStorage::Create(runtime::Backend* backend,
                                                                       const KvCacheShape& shape) {
  if (shape.num_layers <= 0 || shape.num_blocks <= 0 || shape.block_size <= 0 ||
      shape.kv_heads <= 0 || shape.head_dim <= 0) {
    return absl::InvalidArgumentError(fmt::format(
        "KV cache: every size must be positive (layers {}, blocks {}, block_size {}, "
        "kv_heads {}, head_dim {})",
        shape.num_layers, shape.num_blocks, shape.block_size, shape.kv_heads, shape.head_dim));
  }
  if (shape.dtype != runtime::DType::kF32 && shape.dtype != runtime::DType::kF16 &&
      shape.dtype != runtime::DType::kBF16) {
    return absl::InvalidArgumentError(fmt::format(
        "KV cache: dtype must be F32, F16 or BF16, got {}", runtime::DTypeName(shape.dtype)));
  }
  auto storage = std::unique_ptr<KvCacheStorage>(new KvCacheStorage(shape));
  const std::initializer_list<int64_t> dims = {shape.num_blocks, shape.block_size, shape.kv_heads,
                                               shape.head_dim};
  const size_t pool_bytes = KvPoolBytes(shape);
  for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
    SY_ASSIGN_OR_RETURN(runtime::Buffer k, backend->Allocate(pool_bytes));
    SY_ASSIGN_OR_RETURN(runtime::Buffer v, backend->Allocate(pool_bytes));
    storage->k_.push_back(k.View(shape.dtype, dims));
    storage->v_.push_back(v.View(shape.dtype, dims));
    storage->buffers_.push_back(std::move(k));
    storage->buffers_.push_back(std::move(v));
  }
  return storage;
}

size_t KvCacheStorage::size_bytes() const {
  size_t total = 0;
  for (const runtime::Buffer& b : buffers_)
    total += b.size_bytes();
  return total;
}

}  // namespace switchyard::model
