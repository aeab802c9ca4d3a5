// LlamaModel: the eager forward pass of a Llama-family decoder (Llama, Mistral, Qwen2,
// Qwen3, Qwen3-MoE, Gemma 3 weights as LlamaWeights describes) over one ForwardBatch
// against a paged KV cache: embedding, then per layer RMSNorm, Q/K/V projections (+bias,
// + per-head q/k norms), RoPE, KV write, paged attention, output projection (+ post-norm)
// and residual, RMSNorm, an MLP (SwiGLU, GeGLU, or Qwen3-MoE's experts: moe_ffn.h)
// (+ post-norm) and residual; then the final norm, lm_head and logit soft-capping on the
// rows that want logits only.
//
// The op sequence lives in one place (llama_graph.cc: DecoderLayer and Head), written
// against runtime::Backend alone, so a later compiled mode can take the same graph.
//
// All activations are allocated at construction for `max_num_batched_tokens` tokens and
// `max_logit_rows` logit rows; Forward allocates nothing. Threads: one thread drives a
// model (the engine loop). Borrows the backend; owns its weights and activations.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

#include "model/forward_batch.h"
#include "model/kv_cache_storage.h"
#include "model/model_files.h"
#include "model/weights.h"
#include "runtime/backend.h"

namespace switchyard::model {

struct LlamaModelOptions {
  int64_t max_num_batched_tokens = 512;  // tokens per step
  int64_t max_logit_rows = 64;           // rows of logits per step
  // The matrices' dtype on the device (F32, F16 or BF16). Unset: as stored.
  std::optional<runtime::DType> weight_dtype;
  // KV cache dtype (F32, F16 or BF16). Unset: DefaultKvDType.
  std::optional<runtime::DType> kv_dtype;
};

// The KV cache dtype unless the options name one: F32 when the layers' weights are F32 on
// the device (exact f32 runs stay exact), else F16, which halves attention's reads at decode
// (llama.cpp's default too) and rounds K/V by at most 2^-11 relative.
runtime::DType DefaultKvDType(bool f32_layer_weights);

// Device buffers for one step's activations; see llama_graph.h.
struct Activations;

class LlamaModel {
 public:
  // Loads the weights of `files` onto `backend` and allocates activations.
  // REQUIRES: `files` and `backend` outlive the model (weights may wrap the file's mmap).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const ModelFiles& files,
                                                            runtime::Backend* backend,
                                                            const LlamaModelOptions& options);
  ~LlamaModel();

  const ModelConfig& config() const { return weights_->config; }
  const LlamaModelOptions& options() const { return options_; }
  const LlamaWeights& weights() const { return *weights_; }

  // The shape of a KV cache this model can run against, in the dtype the options chose.
  KvCacheShape KvShape(int64_t num_blocks, int64_t block_size) const;

  // Runs one step and writes logits of batch.logit_rows, row after row, to `logits`
  // (vocab_size floats each); a step may want none (a prefill chunk that does not end
  // its prompt). Writes the batch's K/V into `kv` at batch.slot_ids.
  // Errors (InvalidArgument, OutOfRange): sizes that disagree, more tokens or logit rows
  // than the options allow, ids outside the vocabulary, a KV cache of another shape, and
  // whatever the backend rejects (sequences outside the batch, short block tables).
  // REQUIRES: logits.size() == batch.logit_rows.size() * vocab_size.
  absl::Status Forward(const ForwardBatch& batch, const KvCacheStorage& kv,
                       std::span<float> logits);

  // Forward's checks of a batch and a KV cache (for a compiled step that runs it instead).
  absl::Status CheckBatch(const ForwardBatch& batch, const KvCacheStorage& kv) const;

 private:
  LlamaModel(runtime::Backend* backend, const LlamaModelOptions& options);

  runtime::Backend* backend_;
  LlamaModelOptions options_;
  std::unique_ptr<LlamaWeights> weights_;
  std::unique_ptr<runtime::RopeTable> rope_;
  std::unique_ptr<runtime::RopeTable> local_rope_;  // sliding layers' (Gemma 3), if they differ
  std::unique_ptr<Activations> act_;
};

}  // namespace switchyard::model
