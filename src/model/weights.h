// LlamaWeights: the weights of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3,
// Qwen3-MoE, Gemma 3) in a backend's memory, loaded from a ModelFiles (HF safetensors or
// GGUF names), with the rotary parameters the weights imply.
//
// Matrices keep their stored dtype (F32, F16, BF16, Q8_0 and GGML's Q4/Q5/K types) unless the
// options ask for a conversion; on a backend whose device memory is host memory they are wrapped
// from the memory map without copying when aligned, so the ModelFiles must outlive the weights.
// Norm weights and biases are F32; norm weights include config.norm_weight_offset. GGUF "llama" Q/K
// rows are in llama.cpp's interleaved rotary layout, so `rope.style` is kInterleaved for them
// (attention scores are invariant to that row permutation when q and k share it); HF weights and
// GGUF "qwen2" use kNeox.
//
// Immutable after loading; read by the thread that drives the backend. Owns its buffers;
// they must not outlive the backend.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "model/model_config.h"
#include "model/model_files.h"
#include "runtime/backend.h"

namespace switchyard::model {

struct LayerWeights {
  runtime::Tensor attn_norm;                      // [d]
  runtime::Tensor wq, wk, wv, wo;                 // [heads*hd, d], [kv*hd, d] x2, [d, heads*hd]
  std::optional<runtime::Tensor> bq, bk, bv;      // F32 [rows of wq/wk/wv]
  std::optional<runtime::Tensor> q_norm, k_norm;  // F32 [hd] (Qwen3)
  runtime::Tensor ffn_norm;                       // [d]
  runtime::Tensor w_gate, w_up, w_down;           // [f, d], [f, d], [d, f]
  // Gemma's sandwich norms on the attention and MLP outputs: F32 [d].
  std::optional<runtime::Tensor> post_attn_norm, post_ffn_norm;
  // Mixture of experts, in place of w_gate/w_up/w_down: the router F32 [E, d] (F32 under
  // every dtype policy: routing must not flip on rounding) and one [fe, d], [fe, d], [d, fe]
  // matrix per expert (views into GGUF's stacked 3-D tensors, or HF's own tensors).
  std::optional<runtime::Tensor> router;
  std::vector<runtime::Tensor> expert_gate, expert_up, expert_down;
};

// How the weights reached the backend's memory (the startup report's weights part).
struct WeightsLoad {
  std::string source;          // the checkpoint's path
  size_t mapped_bytes = 0;     // wrapped from the file's memory map: shared, not copied
  size_t copied_bytes = 0;     // copied as stored (a tensor the map did not align)
  size_t converted_bytes = 0;  // converted to another dtype on the host (bytes after)
  // Copies of the matrices the backend laid out for MatMul (Backend::PackMatMulWeights):
  // memory on top of the above.
  size_t packed_bytes = 0;
  double seconds = 0.0;
};

struct LlamaWeights {
  ModelConfig config;
  runtime::Tensor embed;  // [vocab, d]
  std::vector<LayerWeights> layers;
  runtime::Tensor final_norm;  // [d]
  runtime::Tensor lm_head;     // [vocab, d]; the embedding table when tied
  runtime::RopeParams rope;
  // The sliding layers' rotary parameters when they differ from `rope` (Gemma 3).
  std::optional<runtime::RopeParams> local_rope;
  std::vector<runtime::Buffer> buffers;  // owners of the device memory above
  // MatMul's copies of the matrices; declared after `buffers`, so it goes first.
  runtime::Buffer packed;
  WeightsLoad load;
};

// `matrix_dtype` is the device dtype of the matrices (embedding, projections, lm_head): F32,
// F16 or BF16, or unset to keep each as stored. Errors name the weight file and tensor: a
// missing tensor, a wrong shape, or a dtype the runtime has no kernels for (InvalidArgument /
// Unimplemented); InvalidArgument for another matrix_dtype.
absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(
    const ModelFiles& files, runtime::Backend* backend, std::optional<runtime::DType> matrix_dtype);

}  // namespace switchyard::model
