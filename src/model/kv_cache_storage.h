// KvCacheStorage: the device memory of a paged KV cache. For every layer one K pool and one
// V pool of shape [num_blocks, block_size, kv_heads, head_dim], allocated once through the
// backend. Which block belongs to which sequence is the KV cache manager's business (block
// tables in ForwardBatch); this class only owns the memory.
//
// Threads: used by the thread that drives the backend. Owns its buffers; they must not
// outlive the backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "model/model_config.h"
#include "runtime/backend.h"

namespace switchyard::model {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 16;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  runtime::DType dtype = runtime::DType::kF32;
};

// The cache of `config`'s decoder layers: its layer count, KV heads and head_dim.
KvCacheShape KvShapeOf(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
                       runtime::DType dtype);

// Bytes of one layer's K (or V) pool, and of all pools together: what Create allocates for
// `shape`. The engine sizes its pool and `switchyard model inspect` its estimate with these.
size_t KvPoolBytes(const KvCacheShape& shape);
size_t KvCacheBytes(const KvCacheShape& shape);

class KvCacheStorage {
 public:
  // Errors: InvalidArgument for non-positive sizes or a non-float dtype; the backend's
  // ResourceExhausted when the pools do not fit.
  static absl::StatusOr<std::unique_ptr<KvCacheStorage>> Create(runtime::Backend* backend,
                                                                const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  int64_t num_slots() const { return shape_.num_blocks * shape_.block_size; }
  // Bytes of all pools together.
  size_t size_bytes() const;

  // REQUIRES: 0 <= layer < shape().num_layers.
  const runtime::Tensor& k_pool(int64_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const runtime::Tensor& v_pool(int64_t layer) const { return v_[static_cast<size_t>(layer)]; }

 private:
  explicit KvCacheStorage(const KvCacheShape& shape) : shape_(shape) {}

  KvCacheShape shape_;
  std::vector<runtime::Buffer> buffers_;
  std::vector<runtime::Tensor> k_;
  std::vector<runtime::Tensor> v_;
};

}  // namespace switchyard::model
