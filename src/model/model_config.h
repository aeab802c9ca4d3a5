// ModelConfig: the architecture hyper-parameters of a Llama-family decoder, read from a
// Hugging Face config.json or from GGUF metadata, validated once so that later code can
// rely on them (positive sizes, heads divisible by KV heads, ...). A plain value; copy it
// freely between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::model {

class GgufFile;

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  // kLlama3 only.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
};

// The MLP's gate activation: SwiGLU (silu) or GeGLU with PyTorch's tanh GELU (Gemma).
enum class MlpActivation { kSilu, kGeluTanh };

struct ModelConfig {
  std::string architecture;  // HF class name, e.g. "LlamaForCausalLM"
  std::string model_type;    // "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3_text"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // biases on q/k/v projections (Qwen2)
  bool qk_norm = false;         // RMSNorm on q and k per head (Qwen3)
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;  // empty if unknown
  // Effective sliding window W, if any: each token attends to the last W positions, itself
  // included (see runtime::Backend::PagedAttention).
  std::optional<int64_t> sliding_window;
  // Which layers use sliding_window (Gemma 3 interleaves sliding and global layers); empty
  // when every layer does (Mistral). See LayerWindow.
  std::vector<bool> sliding_layers;
  // Rotary theta of the sliding layers, which then take no rope_scaling (Gemma 3's
  // rope_local_base_freq); unset: every layer uses rope_theta and rope_scaling.
  std::optional<double> rope_local_theta;

  // Gemma's departures from the Llama layer, all off for the Llama family:
  MlpActivation hidden_act = MlpActivation::kSilu;
  double embed_scale = 1.0;  // embeddings are multiplied by it (Gemma: sqrt(hidden_size))
  // Every RMSNorm multiplies by (norm_weight_offset + weight): Gemma's HF weights are stored
  // around 0 (offset 1); llama.cpp's converter adds the 1 into its GGUF weights (offset 0).
  float norm_weight_offset = 0.0f;
  bool sandwich_norms = false;  // RMSNorm on the attention and MLP outputs before each residual
  // Attention scores are scaled by query_pre_attn_scalar^-1/2; 0 means head_dim.
  double query_pre_attn_scalar = 0.0;
  // Mixture of experts (Qwen3-MoE): when num_experts > 0, every layer's MLP is a router
  // over num_experts SwiGLU experts of moe_intermediate_size, num_experts_per_tok of them per
  // token, weighted by their softmax probabilities (renormalized over the chosen ones when
  // norm_topk_prob is set); intermediate_size is then unused.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;

  // logits = cap * tanh(logits / cap) when set. (Gemma 3's attn_logit_softcapping is not
  // read: transformers' Gemma 3 attention ignores it, and so does llama.cpp.)
  std::optional<double> final_logit_softcapping;
};

// The sliding window layer `layer` attends with (0: the whole causal prefix).
int64_t LayerWindow(const ModelConfig& config, int64_t layer);

// The window every layer shares, or 0 when some layer attends to the whole prefix: only
// then may the KV cache drop blocks that fall out of the window.
int64_t CommonSlidingWindow(const ModelConfig& config);

// Architectures we can run; anything else is rejected with the list below.
inline constexpr std::string_view kSupportedArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
    "Qwen3MoeForCausalLM, Gemma3ForCausalLM";

// Parses config.json text; `source` names it in errors ("<file>: rope_scaling.factor: ...").
absl::StatusOr<ModelConfig> ParseModelConfigJson(std::string_view json, std::string_view source);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

// Builds a config from GGUF metadata (general.architecture and its "<arch>.*" keys);
// tensor presence decides tied embeddings, q/k/v biases and q/k norms.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

// Checks the relations between fields; both loaders call it.
absl::Status ValidateModelConfig(const ModelConfig& config, std::string_view source);

}  // namespace switchyard::model
