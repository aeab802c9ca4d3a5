#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/file.h"
#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "model/gguf.h"

namespace switchyard::model {
namespace {

// "<source>: <field>: <what>", the form of the JSON reader's errors, for GGUF keys as well.
absl::Status FieldError(std::string_view source, std::string_view field, std::string_view what) {
  return base::JsonPath(source, std::string(field)).Error(what);
}

struct ArchInfo {
  std::string_view architecture;
  std::string_view model_type;
  std::string_view gguf_arch;
  int64_t default_max_positions;
};

constexpr ArchInfo kArchs[] = {
    {"LlamaForCausalLM", "llama", "llama", 2048},
    {"MistralForCausalLM", "mistral", "", int64_t{4096} * 32},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", 32768},
    {"Qwen3ForCausalLM", "qwen3", "qwen3", 32768},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe", 32768},
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3", 131072},
};

// Gemma 3's defaults where its config.json (or GGUF) leaves a field out, as transformers'
// Gemma3TextConfig and llama.cpp have them.
constexpr double kGemma3GlobalTheta = 1'000'000.0;
constexpr double kGemma3LocalTheta = 10'000.0;
constexpr int64_t kGemma3SlidingWindow = 4096;
constexpr int64_t kGemma3SlidingPattern = 6;  // every 6th layer is global
constexpr double kGemma3QueryPreAttnScalar = 256;

// The Gemma 3 layer without the fields that differ between config.json and GGUF.
void SetGemma3Layer(ModelConfig* config) {
  config->hidden_act = MlpActivation::kGeluTanh;
  config->embed_scale = std::sqrt(static_cast<double>(config->hidden_size));
  config->sandwich_norms = true;
  config->qk_norm = true;
}

std::vector<bool> SlidingPattern(int64_t num_layers, int64_t pattern) {
  std::vector<bool> sliding(static_cast<size_t>(std::max<int64_t>(num_layers, 0)));
  for (size_t i = 0; i < sliding.size(); ++i)
    sliding[i] = (static_cast<int64_t>(i) + 1) % pattern != 0;
  return sliding;
}

// Every read below takes null for absent, as transformers does.
using base::FieldOr;
using base::JsonPath;
using base::OptionalField;
using base::RequiredField;

// Reads `key` into *out when present; leaves it as it is when absent.
template <typename T>
absl::Status ReadIfPresent(simdjson::dom::element object, std::string_view key, const JsonPath& at,
                           T* out) {
  SY_ASSIGN_OR_RETURN(*out, FieldOr<T>(object, key, *out, at));
  return absl::OkStatus();
}

// An integer, a list of integers, or absent.
absl::Status ReadIntList(simdjson::dom::element object, std::string_view key, const JsonPath& at,
                         std::vector<int64_t>* out) {
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> value, OptionalField(object, key, at));
  if (!value)
    return absl::OkStatus();
  int64_t single = 0;
  if (value->get_int64().get(single) == simdjson::SUCCESS) {
    out->push_back(single);
    return absl::OkStatus();
  }
  simdjson::dom::array list;
  auto not_ints = [&] { return at.Child(key).Error("expected an integer or a list of integers"); };
  if (value->get_array().get(list) != simdjson::SUCCESS)
    return not_ints();
  for (simdjson::dom::element item : list) {
    if (item.get_int64().get(single) != simdjson::SUCCESS)
      return not_ints();
    out->push_back(single);
  }
  return absl::OkStatus();
}

absl::Status ParseRopeScaling(simdjson::dom::element root, const JsonPath& root_at,
                              RopeScaling* out) {
  // Each read below checks that it is an object.
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> object,
                      OptionalField(root, "rope_scaling", root_at));
  if (!object)
    return absl::OkStatus();
  const JsonPath at = root_at.Child("rope_scaling");
  // transformers renamed "type" to "rope_type"; files carry either.
  SY_ASSIGN_OR_RETURN(std::optional<std::string_view> type,
                      OptionalField<std::string_view>(*object, "rope_type", at));
  if (!type) {
    SY_ASSIGN_OR_RETURN(type, OptionalField<std::string_view>(*object, "type", at));
  }
  if (!type)
    return at.Child("rope_type").Error("missing required field");
  if (*type == "default")
    return absl::OkStatus();
  if (*type == "linear") {
    out->type = RopeScaling::Type::kLinear;
    return ReadIfPresent(*object, "factor", at, &out->factor);
  }
  if (*type == "llama3") {
    out->type = RopeScaling::Type::kLlama3;
    SY_ASSIGN_OR_RETURN(out->factor, RequiredField<double>(*object, "factor", at));
    SY_ASSIGN_OR_RETURN(out->low_freq_factor,
                        RequiredField<double>(*object, "low_freq_factor", at));
    SY_ASSIGN_OR_RETURN(out->high_freq_factor,
                        RequiredField<double>(*object, "high_freq_factor", at));
    SY_ASSIGN_OR_RETURN(out->original_max_position_embeddings,
                        RequiredField<int64_t>(*object, "original_max_position_embeddings", at));
    return absl::OkStatus();
  }
  return at.Child("rope_type")
      .Error(fmt::format("unsupported '{}' (supported: default, linear, llama3)", *type));
}

absl::Status ParseActivation(simdjson::dom::element root, const JsonPath& at, ModelConfig* config) {
  // Llama-style configs name it hidden_act, Gemma's hidden_activation.
  std::string act;
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "hidden_act", at, &act));
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "hidden_activation", at, &act));
  if (act.empty() || act == "silu") {
    config->hidden_act = MlpActivation::kSilu;
  } else if (act == "gelu_pytorch_tanh") {
    config->hidden_act = MlpActivation::kGeluTanh;
  } else {
    return at.Child("hidden_act")
        .Error(fmt::format("unsupported '{}' (supported: silu, gelu_pytorch_tanh)", act));
  }
  return absl::OkStatus();
}

// Gemma 3's fields: window and layer pattern, local rope, attention scale, soft-capping.
absl::Status ParseGemma3(simdjson::dom::element root, const JsonPath& at, ModelConfig* config) {
  SetGemma3Layer(config);
  // HF stores Gemma's RMSNorm weights around 0 and multiplies by (1 + weight).
  config->norm_weight_offset = 1.0f;
  SY_ASSIGN_OR_RETURN(const bool bidirectional,
                      FieldOr<bool>(root, "use_bidirectional_attention", false, at));
  if (bidirectional) {
    return at.Child("use_bidirectional_attention").Error("only causal attention is supported");
  }
  SY_ASSIGN_OR_RETURN(config->sliding_window,
                      FieldOr<int64_t>(root, "sliding_window", kGemma3SlidingWindow, at));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::array> types,
                      OptionalField<simdjson::dom::array>(root, "layer_types", at));
  if (types) {
    for (simdjson::dom::element e : *types) {
      std::string_view type;
      if (e.get_string().get(type) || (type != "sliding_attention" && type != "full_attention")) {
        return at.Child("layer_types")
            .Error("must list 'sliding_attention' or 'full_attention' per layer");
      }
      config->sliding_layers.push_back(type == "sliding_attention");
    }
    if (static_cast<int64_t>(config->sliding_layers.size()) != config->num_hidden_layers) {
      return at.Child("layer_types")
          .Error(fmt::format("has {} entries for {} layers", config->sliding_layers.size(),
                             config->num_hidden_layers));
    }
  } else {
    SY_ASSIGN_OR_RETURN(const int64_t pattern, FieldOr<int64_t>(root, "sliding_window_pattern",
                                                                kGemma3SlidingPattern, at));
    if (pattern <= 0)
      return at.Child("sliding_window_pattern").Error("must be positive");
    config->sliding_layers = SlidingPattern(config->num_hidden_layers, pattern);
  }
  SY_ASSIGN_OR_RETURN(config->rope_local_theta,
                      FieldOr<double>(root, "rope_local_base_freq", kGemma3LocalTheta, at));
  SY_ASSIGN_OR_RETURN(
      config->query_pre_attn_scalar,
      FieldOr<double>(root, "query_pre_attn_scalar", kGemma3QueryPreAttnScalar, at));
  SY_ASSIGN_OR_RETURN(config->final_logit_softcapping,
                      OptionalField<double>(root, "final_logit_softcapping", at));
  return absl::OkStatus();
}

// Qwen3-MoE's expert fields. Only models whose every layer is sparse are supported.
absl::Status ParseQwen3Moe(simdjson::dom::element root, const JsonPath& at, ModelConfig* config) {
  SY_ASSIGN_OR_RETURN(config->num_experts, RequiredField<int64_t>(root, "num_experts", at));
  SY_ASSIGN_OR_RETURN(config->num_experts_per_tok,
                      RequiredField<int64_t>(root, "num_experts_per_tok", at));
  SY_ASSIGN_OR_RETURN(config->moe_intermediate_size,
                      RequiredField<int64_t>(root, "moe_intermediate_size", at));
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "norm_topk_prob", at, &config->norm_topk_prob));
  SY_ASSIGN_OR_RETURN(const int64_t sparse_step,
                      FieldOr<int64_t>(root, "decoder_sparse_step", 1, at));
  if (sparse_step != 1)
    return at.Child("decoder_sparse_step").Error("only 1 (every layer sparse) is supported");
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::array> dense_layers,
                      OptionalField<simdjson::dom::array>(root, "mlp_only_layers", at));
  if (dense_layers && dense_layers->size() != 0)
    return at.Child("mlp_only_layers").Error("dense layers in a MoE model are not supported");
  return absl::OkStatus();
}

}  // namespace

int64_t LayerWindow(const ModelConfig& config, int64_t layer) {
  const bool slides =
      config.sliding_layers.empty() || config.sliding_layers[static_cast<size_t>(layer)];
  return slides ? config.sliding_window.value_or(0) : 0;
}

int64_t CommonSlidingWindow(const ModelConfig& config) {
  for (const bool slides : config.sliding_layers) {
    if (!slides)
      return 0;
  }
  return config.sliding_window.value_or(0);
}

absl::StatusOr<ModelConfig> ParseModelConfigJson(std::string_view json, std::string_view source) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, source));
  const simdjson::dom::element root = doc->root();
  const JsonPath at(source);
  if (!root.is_object())
    return at.Error("expected an object");
  ModelConfig config;

  SY_ASSIGN_OR_RETURN(simdjson::dom::array architectures,
                      RequiredField<simdjson::dom::array>(root, "architectures", at));
  std::string_view arch;
  if (architectures.size() == 0 || architectures.at(0).get_string().get(arch)) {
    return at.Child("architectures").Error("expected a non-empty list of strings");
  }
  const ArchInfo* info = nullptr;
  for (const ArchInfo& candidate : kArchs) {
    if (candidate.architecture == arch) {
      info = &candidate;
    }
  }
  if (info == nullptr) {
    return at.Child("architectures")
        .Error(fmt::format("unsupported architecture '{}' (supported: {})", arch,
                           kSupportedArchitectures));
  }
  config.architecture = std::string(info->architecture);
  config.model_type = std::string(info->model_type);
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "model_type", at, &config.model_type));

  SY_ASSIGN_OR_RETURN(config.hidden_size, RequiredField<int64_t>(root, "hidden_size", at));
  SY_ASSIGN_OR_RETURN(config.intermediate_size,
                      RequiredField<int64_t>(root, "intermediate_size", at));
  SY_ASSIGN_OR_RETURN(config.num_hidden_layers,
                      RequiredField<int64_t>(root, "num_hidden_layers", at));
  SY_ASSIGN_OR_RETURN(config.num_attention_heads,
                      RequiredField<int64_t>(root, "num_attention_heads", at));
  SY_ASSIGN_OR_RETURN(config.vocab_size, RequiredField<int64_t>(root, "vocab_size", at));
  config.num_key_value_heads = config.num_attention_heads;
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "num_key_value_heads", at, &config.num_key_value_heads));
  SY_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim,
                      OptionalField<int64_t>(root, "head_dim", at));
  if (head_dim) {
    config.head_dim = *head_dim;
  } else {
    if (config.num_attention_heads <= 0 || config.hidden_size % config.num_attention_heads != 0) {
      return at.Child("num_attention_heads")
          .Error(fmt::format("{} does not divide hidden_size {} and head_dim is absent",
                             config.num_attention_heads, config.hidden_size));
    }
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  config.max_position_embeddings = info->default_max_positions;
  SY_RETURN_IF_ERROR(
      ReadIfPresent(root, "max_position_embeddings", at, &config.max_position_embeddings));
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "rms_norm_eps", at, &config.rms_norm_eps));
  const bool gemma3 = config.architecture == "Gemma3ForCausalLM";
  if (gemma3)
    config.rope_theta = kGemma3GlobalTheta;
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "rope_theta", at, &config.rope_theta));
  SY_RETURN_IF_ERROR(ParseRopeScaling(root, at, &config.rope_scaling));
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "tie_word_embeddings", at, &config.tie_word_embeddings));
  // Qwen2's attention always has q/k/v biases; its config has no flag for them.
  config.attention_bias = config.architecture == "Qwen2ForCausalLM";
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "attention_bias", at, &config.attention_bias));
  config.qk_norm = config.model_type == "qwen3" || config.model_type == "qwen3_moe";
  if (config.architecture == "Qwen3MoeForCausalLM")
    SY_RETURN_IF_ERROR(ParseQwen3Moe(root, at, &config));
  SY_ASSIGN_OR_RETURN(config.bos_token_id, OptionalField<int64_t>(root, "bos_token_id", at));
  SY_RETURN_IF_ERROR(ReadIntList(root, "eos_token_id", at, &config.eos_token_ids));
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "torch_dtype", at, &config.torch_dtype));
  if (config.torch_dtype.empty())
    SY_RETURN_IF_ERROR(ReadIfPresent(root, "dtype", at, &config.torch_dtype));

  SY_RETURN_IF_ERROR(ParseActivation(root, at, &config));
  if (gemma3) {
    SY_RETURN_IF_ERROR(ParseGemma3(root, at, &config));
    SY_RETURN_IF_ERROR(ValidateModelConfig(config, source));
    return config;
  }
  // Qwen configs carry a sliding_window that only applies when use_sliding_window is set.
  bool use_sliding_window = config.model_type == "mistral";
  SY_RETURN_IF_ERROR(ReadIfPresent(root, "use_sliding_window", at, &use_sliding_window));
  if (use_sliding_window) {
    SY_ASSIGN_OR_RETURN(config.sliding_window, OptionalField<int64_t>(root, "sliding_window", at));
  }
  SY_RETURN_IF_ERROR(ValidateModelConfig(config, source));
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  SY_ASSIGN_OR_RETURN(const std::string text, base::ReadFile(path));
  return ParseModelConfigJson(text, path);
}

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf) {
  const std::string& source = gguf.source();
  SY_ASSIGN_OR_RETURN(const std::string_view arch, gguf.GetString("general.architecture"));
  const ArchInfo* info = nullptr;
  for (const ArchInfo& candidate : kArchs) {
    if (!candidate.gguf_arch.empty() && candidate.gguf_arch == arch) {
      info = &candidate;
    }
  }
  if (info == nullptr) {
    return FieldError(source, "general.architecture",
                      fmt::format("unsupported architecture '{}' (supported: llama, qwen2, qwen3, "
                                  "qwen3moe, gemma3)",
                                  std::string(arch)));
  }
  ModelConfig config;
  config.architecture = std::string(info->architecture);
  config.model_type = std::string(info->model_type);
  const std::string prefix = std::string(arch) + ".";
  auto get_int = [&](std::string_view key, int64_t* out) -> absl::Status {
    SY_ASSIGN_OR_RETURN(*out, gguf.GetInt(prefix + std::string(key)));
    return absl::OkStatus();
  };
  auto get_optional_int = [&](std::string_view key, int64_t* out) -> absl::Status {
    if (gguf.Find(prefix + std::string(key)) == nullptr) {
      return absl::OkStatus();
    }
    return get_int(key, out);
  };
  auto get_optional_float = [&](std::string_view key, double* out) -> absl::Status {
    if (gguf.Find(prefix + std::string(key)) == nullptr) {
      return absl::OkStatus();
    }
    SY_ASSIGN_OR_RETURN(*out, gguf.GetFloat(prefix + std::string(key)));
    return absl::OkStatus();
  };
  SY_RETURN_IF_ERROR(get_int("embedding_length", &config.hidden_size));
  SY_RETURN_IF_ERROR(get_int("block_count", &config.num_hidden_layers));
  SY_RETURN_IF_ERROR(get_int("feed_forward_length", &config.intermediate_size));
  SY_RETURN_IF_ERROR(get_int("attention.head_count", &config.num_attention_heads));
  config.num_key_value_heads = config.num_attention_heads;
  SY_RETURN_IF_ERROR(get_optional_int("attention.head_count_kv", &config.num_key_value_heads));
  if (config.num_attention_heads > 0) {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  SY_RETURN_IF_ERROR(get_optional_int("attention.key_length", &config.head_dim));
  config.max_position_embeddings = info->default_max_positions;
  SY_RETURN_IF_ERROR(get_optional_int("context_length", &config.max_position_embeddings));
  SY_RETURN_IF_ERROR(get_optional_float("attention.layer_norm_rms_epsilon", &config.rms_norm_eps));
  SY_RETURN_IF_ERROR(get_optional_float("rope.freq_base", &config.rope_theta));

  if (gguf.Find(prefix + "vocab_size") != nullptr) {
    SY_RETURN_IF_ERROR(get_int("vocab_size", &config.vocab_size));
  } else if (const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens"); tokens != nullptr) {
    config.vocab_size = static_cast<int64_t>(tokens->count);
  } else if (const TensorView* embed = gguf.FindTensor("token_embd.weight");
             embed != nullptr && embed->shape.size() == 2) {
    config.vocab_size = embed->shape[0];
  } else {
    return FieldError(source, prefix + "vocab_size",
                      "missing, and there is neither tokenizer.ggml.tokens nor token_embd.weight");
  }

  if (gguf.Find(prefix + "rope.scaling.type") != nullptr) {
    SY_ASSIGN_OR_RETURN(const std::string_view type, gguf.GetString(prefix + "rope.scaling.type"));
    if (type == "linear") {
      config.rope_scaling.type = RopeScaling::Type::kLinear;
      SY_RETURN_IF_ERROR(get_optional_float("rope.scaling.factor", &config.rope_scaling.factor));
    } else if (type != "none") {
      return FieldError(
          source, prefix + "rope.scaling.type",
          fmt::format("unsupported '{}' (supported: none, linear)", std::string(type)));
    }
  }
  if (gguf.Find(prefix + "attention.sliding_window") != nullptr) {
    int64_t window = 0;
    SY_RETURN_IF_ERROR(get_int("attention.sliding_window", &window));
    config.sliding_window = window;
  }
  if (arch == "qwen3moe") {
    // llama.cpp's qwen3moe always renormalizes the chosen experts' weights.
    SY_RETURN_IF_ERROR(get_int("expert_count", &config.num_experts));
    SY_RETURN_IF_ERROR(get_int("expert_used_count", &config.num_experts_per_tok));
    SY_RETURN_IF_ERROR(get_int("expert_feed_forward_length", &config.moe_intermediate_size));
    config.norm_topk_prob = true;
  }
  if (arch == "gemma3") {
    // As llama.cpp loads gemma3: sliding layers (every layer but each 6th) only when the file
    // names a window, local rope theta 10000 unless `rope.freq_base_swa` says otherwise, and
    // norm weights that already include Gemma's +1.
    SetGemma3Layer(&config);
    if (config.sliding_window.has_value()) {
      config.sliding_layers = SlidingPattern(config.num_hidden_layers, kGemma3SlidingPattern);
      config.rope_local_theta = kGemma3LocalTheta;
      SY_RETURN_IF_ERROR(get_optional_float("rope.freq_base_swa", &*config.rope_local_theta));
    }
    // llama.cpp has no key for query_pre_attn_scalar: head_dim, except for the 27B model
    // (62 layers), whose scalar is hidden_size / heads.
    config.query_pre_attn_scalar = static_cast<double>(
        config.num_hidden_layers == 62 ? config.hidden_size / config.num_attention_heads
                                       : config.head_dim);
    if (gguf.Find(prefix + "final_logit_softcapping") != nullptr) {
      double cap = 0;
      SY_RETURN_IF_ERROR(get_optional_float("final_logit_softcapping", &cap));
      config.final_logit_softcapping = cap;
    }
  }
  config.tie_word_embeddings = gguf.FindTensor("output.weight") == nullptr;
  config.attention_bias = gguf.FindTensor("blk.0.attn_q.bias") != nullptr;
  config.qk_norm = gguf.FindTensor("blk.0.attn_q_norm.weight") != nullptr;
  if (gguf.Find("tokenizer.ggml.bos_token_id") != nullptr) {
    SY_ASSIGN_OR_RETURN(config.bos_token_id, gguf.GetInt("tokenizer.ggml.bos_token_id"));
  }
  if (gguf.Find("tokenizer.ggml.eos_token_id") != nullptr) {
    SY_ASSIGN_OR_RETURN(const int64_t eos, gguf.GetInt("tokenizer.ggml.eos_token_id"));
    config.eos_token_ids.push_back(eos);
  }
  SY_RETURN_IF_ERROR(ValidateModelConfig(config, source));
  return config;
}

absl::Status ValidateModelConfig(const ModelConfig& config, std::string_view source) {
  const std::pair<std::string_view, int64_t> positive[] = {
      {"hidden_size", config.hidden_size},
      {"intermediate_size", config.intermediate_size},
      {"num_hidden_layers", config.num_hidden_layers},
      {"num_attention_heads", config.num_attention_heads},
      {"num_key_value_heads", config.num_key_value_heads},
      {"head_dim", config.head_dim},
      {"vocab_size", config.vocab_size},
      {"max_position_embeddings", config.max_position_embeddings},
  };
  for (const auto& [field, value] : positive) {
    if (value <= 0) {
      return FieldError(source, field, fmt::format("must be positive, got {}", value));
    }
  }
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return FieldError(source, "num_key_value_heads",
                      fmt::format("{} does not divide num_attention_heads {}",
                                  config.num_key_value_heads, config.num_attention_heads));
  }
  if (config.head_dim % 2 != 0) {
    return FieldError(
        source, "head_dim",
        fmt::format("{} is odd; rotary embeddings need an even size", config.head_dim));
  }
  if (!(config.rms_norm_eps > 0) || !std::isfinite(config.rms_norm_eps)) {
    return FieldError(source, "rms_norm_eps", "must be a positive number");
  }
  if (!(config.rope_theta > 0) || !std::isfinite(config.rope_theta)) {
    return FieldError(source, "rope_theta", "must be a positive number");
  }
  const RopeScaling& rope = config.rope_scaling;
  if (rope.type != RopeScaling::Type::kNone && !(rope.factor > 0)) {
    return FieldError(source, "rope_scaling.factor", "must be positive");
  }
  if (rope.type == RopeScaling::Type::kLlama3) {
    if (!(rope.low_freq_factor > 0) || !(rope.high_freq_factor > rope.low_freq_factor)) {
      return FieldError(source, "rope_scaling.high_freq_factor",
                        "needs 0 < low_freq_factor < high_freq_factor");
    }
    if (rope.original_max_position_embeddings <= 0) {
      return FieldError(source, "rope_scaling.original_max_position_embeddings",
                        "must be positive");
    }
  }
  if (config.bos_token_id &&
      (*config.bos_token_id < 0 || *config.bos_token_id >= config.vocab_size)) {
    return FieldError(
        source, "bos_token_id",
        fmt::format("{} is outside the vocabulary of {}", *config.bos_token_id, config.vocab_size));
  }
  for (const int64_t eos : config.eos_token_ids) {
    if (eos < 0 || eos >= config.vocab_size) {
      return FieldError(source, "eos_token_id",
                        fmt::format("{} is outside the vocabulary of {}", eos, config.vocab_size));
    }
  }
  if (config.sliding_window && *config.sliding_window <= 0) {
    return FieldError(source, "sliding_window", "must be positive");
  }
  if (config.num_experts < 0 ||
      (config.num_experts > 0 &&
       (config.num_experts_per_tok <= 0 || config.num_experts_per_tok > config.num_experts ||
        config.moe_intermediate_size <= 0))) {
    return FieldError(
        source, "num_experts_per_tok",
        fmt::format("needs 0 < num_experts_per_tok ({}) <= num_experts ({}) and a "
                    "positive moe_intermediate_size ({})",
                    config.num_experts_per_tok, config.num_experts, config.moe_intermediate_size));
  }
  if (!config.sliding_layers.empty() &&
      static_cast<int64_t>(config.sliding_layers.size()) != config.num_hidden_layers) {
    return FieldError(source, "layer_types", "needs one entry per layer");
  }
  if (config.rope_local_theta &&
      (!(*config.rope_local_theta > 0) || !std::isfinite(*config.rope_local_theta))) {
    return FieldError(source, "rope_local_base_freq", "must be a positive number");
  }
  if (!(config.query_pre_attn_scalar >= 0) || !std::isfinite(config.query_pre_attn_scalar)) {
    return FieldError(source, "query_pre_attn_scalar", "must be a positive number");
  }
  if (config.final_logit_softcapping &&
      (!(*config.final_logit_softcapping > 0) || !std::isfinite(*config.final_logit_softcapping))) {
    return FieldError(source, "final_logit_softcapping", "must be a positive number");
  }
  return absl::OkStatus();
}

}  // namespace switchyard::model
