#include "model/weights.h"

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "model/device_dtype.h"
#include "runtime/float16.h"

namespace switchyard::model {
namespace {

// Alignment a tensor's data needs before it can be wrapped in place (Buffer::View's rule):
// 4 bytes for F32, 2 for the 16-bit and block types (read through memcpy or unaligned
// loads; most blocks start with an fp16 scale).
uintptr_t WrapAlignment(runtime::DType dtype) {
  return dtype == runtime::DType::kF32 ? 4 : 2;
}

enum class Role {
  kMatrix,  // takes the requested matrix dtype
  kVector,  // converted to F32
  kNorm,    // converted to F32, plus the config's norm_weight_offset
};

// Tensor names in one file format.
struct Names {
  bool gguf = false;

  std::string Embed() const { return gguf ? "token_embd.weight" : "model.embed_tokens.weight"; }
  std::string FinalNorm() const { return gguf ? "output_norm.weight" : "model.norm.weight"; }
  std::string LmHead() const { return gguf ? "output.weight" : "lm_head.weight"; }
  // `hf` is the HF suffix after "model.layers.N.", `gg` the GGUF one after "blk.N.".
  std::string Layer(int64_t i, std::string_view hf, std::string_view gg) const {
    return gguf ? fmt::format("blk.{}.{}", i, gg) : fmt::format("model.layers.{}.{}", i, hf);
  }
};

class Loader {
 public:
  Loader(const ModelFiles& files, runtime::Backend* backend,
         std::optional<runtime::DType> matrix_dtype, LlamaWeights* out)
      : files_(files),
        backend_(backend),
        matrix_dtype_(matrix_dtype),
        norm_offset_(out->config.norm_weight_offset),
        out_(out) {}

  absl::StatusOr<runtime::Tensor> Load(const std::string& name, Role role,
                                       std::initializer_list<int64_t> expected_shape) {
    const TensorView* view = files_.FindTensor(name);
    if (view == nullptr) {
      return absl::NotFoundError(fmt::format("{}: tensor '{}' is missing", files_.path(), name));
    }
    return Upload(*view, role, expected_shape);
  }

  absl::StatusOr<std::optional<runtime::Tensor>> LoadOptional(
      const std::string& name, Role role, std::initializer_list<int64_t> expected_shape) {
    const TensorView* view = files_.FindTensor(name);
    if (view == nullptr)
      return std::optional<runtime::Tensor>();
    SY_ASSIGN_OR_RETURN(runtime::Tensor t, Upload(*view, role, expected_shape));
    return std::optional<runtime::Tensor>(t);
  }

 private:
  absl::StatusOr<runtime::Tensor> Upload(const TensorView& view, Role role,
                                         std::initializer_list<int64_t> expected_shape) {
    if (!std::equal(view.shape.begin(), view.shape.end(), expected_shape.begin(),
                    expected_shape.end())) {
      return absl::InvalidArgumentError(
          fmt::format("{}: tensor '{}': shape [{}], expected [{}]", files_.path(), view.name,
                      fmt::join(view.shape, ", "), fmt::join(expected_shape, ", ")));
    }
    std::optional<runtime::DType> stored = RuntimeDTypeOf(view.dtype);
    if (!stored.has_value()) {
      return absl::UnimplementedError(
          fmt::format("{}: tensor '{}': dtype {} is not supported (F32, F16, BF16, Q8_0, Q4_0, "
                      "Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K are)",
                      files_.path(), view.name, DTypeName(view.dtype)));
    }
    runtime::DType target = *stored;
    const float offset = role == Role::kNorm ? norm_offset_ : 0.0f;
    if (role != Role::kMatrix) {
      target = runtime::DType::kF32;
    } else if (matrix_dtype_.has_value()) {
      target = *matrix_dtype_;
    }
    const int64_t cols = view.shape.back();
    const int64_t rows = view.num_elements / cols;
    if (target == *stored && offset == 0.0f) {
      const size_t bytes = static_cast<size_t>(view.byte_size);
      if (reinterpret_cast<uintptr_t>(view.data) % WrapAlignment(target) == 0) {
        SY_ASSIGN_OR_RETURN(runtime::Buffer buffer, backend_->WrapHost(view.data, bytes));
        out_->load.mapped_bytes += bytes;
        return Keep(std::move(buffer), target, view.shape);
      }
      SY_ASSIGN_OR_RETURN(runtime::Buffer buffer, backend_->Allocate(bytes));
      runtime::Tensor t = buffer.View(target, view.shape);
      SY_RETURN_IF_ERROR(backend_->CopyToDevice(view.data, t));
      out_->load.copied_bytes += bytes;
      return Keep(std::move(buffer), target, view.shape);
    }
    // Convert row by row on the host, then upload once.
    const size_t in_row_bytes = runtime::RowBytes(*stored, cols);
    const size_t out_row_bytes = runtime::RowBytes(target, cols);
    std::vector<uint8_t> host(static_cast<size_t>(rows) * out_row_bytes);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      runtime::DequantizeRow(*stored, view.data + static_cast<size_t>(r) * in_row_bytes, cols,
                             row.data());
      uint8_t* dst = host.data() + static_cast<size_t>(r) * out_row_bytes;
      if (target == runtime::DType::kF32) {
        for (float& value : row)
          value += offset;  // (1 + w) in f32, as Gemma's RMSNorm computes it
        std::memcpy(dst, row.data(), out_row_bytes);
      } else {
        for (int64_t c = 0; c < cols; ++c) {
          const float value = row[static_cast<size_t>(c)];
          uint16_t h =
              target == runtime::DType::kF16 ? runtime::F32ToF16(value) : runtime::F32ToBf16(value);
          std::memcpy(dst + 2 * c, &h, 2);
        }
      }
    }
    SY_ASSIGN_OR_RETURN(runtime::Buffer buffer, backend_->Allocate(host.size()));
    runtime::Tensor t = buffer.View(target, view.shape);
    SY_RETURN_IF_ERROR(backend_->CopyToDevice(host.data(), t));
    out_->load.converted_bytes += host.size();
    return Keep(std::move(buffer), target, view.shape);
  }

  runtime::Tensor Keep(runtime::Buffer buffer, runtime::DType dtype,
                       const std::vector<int64_t>& shape) {
    runtime::Tensor t = buffer.View(dtype, shape);
    out_->buffers.push_back(std::move(buffer));
    return t;
  }

  const ModelFiles& files_;
  runtime::Backend* backend_;
  std::optional<runtime::DType> matrix_dtype_;
  float norm_offset_;
  LlamaWeights* out_;
};

absl::Status SetRope(const ModelFiles& files, LlamaWeights* w) {
  const ModelConfig& c = w->config;
  runtime::RopeParams& rope = w->rope;
  rope.head_dim = c.head_dim;
  rope.rotary_dim = c.head_dim;
  rope.theta = c.rope_theta;
  rope.style = runtime::RopeStyle::kNeox;
  switch (c.rope_scaling.type) {
    case RopeScaling::Type::kNone:
      rope.scaling = runtime::RopeScalingType::kNone;
      break;
    case RopeScaling::Type::kLinear:
      rope.scaling = runtime::RopeScalingType::kLinear;
      break;
    case RopeScaling::Type::kLlama3:
      rope.scaling = runtime::RopeScalingType::kLlama3;
      break;
  }
  rope.factor = c.rope_scaling.factor;
  rope.low_freq_factor = c.rope_scaling.low_freq_factor;
  rope.high_freq_factor = c.rope_scaling.high_freq_factor;
  rope.original_max_position_embeddings = c.rope_scaling.original_max_position_embeddings;
  if (c.rope_local_theta.has_value()) {
    runtime::RopeParams& local = w->local_rope.emplace();
    local.head_dim = c.head_dim;
    local.rotary_dim = c.head_dim;
    local.theta = *c.rope_local_theta;
    local.style = runtime::RopeStyle::kNeox;
  }
  if (files.gguf() == nullptr)
    return absl::OkStatus();
  SY_ASSIGN_OR_RETURN(std::string_view arch, files.gguf()->GetString("general.architecture"));
  if (arch == "llama")
    rope.style = runtime::RopeStyle::kInterleaved;
  if (const TensorView* freqs = files.gguf()->FindTensor("rope_freqs.weight")) {
    if (freqs->dtype != DType::kF32 || freqs->num_elements != c.head_dim / 2) {
      return absl::InvalidArgumentError(
          fmt::format("{}: tensor 'rope_freqs.weight': expected F32[{}], got {}[{}]", files.path(),
                      c.head_dim / 2, DTypeName(freqs->dtype), freqs->num_elements));
    }
    rope.freq_factors.resize(static_cast<size_t>(freqs->num_elements));
    std::memcpy(rope.freq_factors.data(), freqs->data, rope.freq_factors.size() * sizeof(float));
  }
  return absl::OkStatus();
}

// A MoE layer's router and experts: HF names each expert's matrices
// (mlp.experts.E.gate_proj.weight); GGUF stacks them into one [E, rows, cols] tensor each
// (ffn_gate_exps.weight), which is cut into per-expert views.
absl::Status LoadExperts(Loader& loader, const Names& names, const ModelConfig& c, int64_t i,
                         LayerWeights* l) {
  const int64_t d = c.hidden_size;
  const int64_t fe = c.moe_intermediate_size;
  const int64_t experts = c.num_experts;
  SY_ASSIGN_OR_RETURN(l->router,
                      loader.Load(names.Layer(i, "mlp.gate.weight", "ffn_gate_inp.weight"),
                                  Role::kVector, {experts, d}));
  struct Kind {
    std::string_view hf, gg;
    int64_t rows, cols;
    std::vector<runtime::Tensor>* out;
  };
  const Kind kinds[] = {{"gate_proj", "ffn_gate_exps", fe, d, &l->expert_gate},
                        {"up_proj", "ffn_up_exps", fe, d, &l->expert_up},
                        {"down_proj", "ffn_down_exps", d, fe, &l->expert_down}};
  for (const Kind& kind : kinds) {
    kind.out->reserve(static_cast<size_t>(experts));
    if (names.gguf) {
      SY_ASSIGN_OR_RETURN(runtime::Tensor stacked,
                          loader.Load(names.Layer(i, "", fmt::format("{}.weight", kind.gg)),
                                      Role::kMatrix, {experts, kind.rows, kind.cols}));
      for (int64_t e = 0; e < experts; ++e)
        kind.out->push_back(stacked.Slice(e, 1).Reshaped({kind.rows, kind.cols}));
      continue;
    }
    for (int64_t e = 0; e < experts; ++e) {
      SY_ASSIGN_OR_RETURN(
          runtime::Tensor t,
          loader.Load(names.Layer(i, fmt::format("mlp.experts.{}.{}.weight", e, kind.hf), ""),
                      Role::kMatrix, {kind.rows, kind.cols}));
      kind.out->push_back(t);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(
    const ModelFiles& files, runtime::Backend* backend,
    std::optional<runtime::DType> matrix_dtype) {
  if (matrix_dtype.has_value() && *matrix_dtype != runtime::DType::kF32 &&
      *matrix_dtype != runtime::DType::kF16 && *matrix_dtype != runtime::DType::kBF16) {
    return absl::InvalidArgumentError(
        fmt::format("weights: a matrix dtype must be F32, F16 or BF16, not {}",
                    runtime::DTypeName(*matrix_dtype)));
  }
  const auto start = std::chrono::steady_clock::now();
  auto w = std::make_unique<LlamaWeights>();
  w->config = files.config();
  w->load.source = files.path();
  const ModelConfig& c = w->config;
  const Names names{files.gguf() != nullptr};
  Loader loader(files, backend, matrix_dtype, w.get());
  const int64_t d = c.hidden_size;
  const int64_t hd = c.head_dim;
  const int64_t q_rows = c.num_attention_heads * hd;
  const int64_t kv_rows = c.num_key_value_heads * hd;
  const int64_t f = c.intermediate_size;

  SY_ASSIGN_OR_RETURN(w->embed, loader.Load(names.Embed(), Role::kMatrix, {c.vocab_size, d}));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights l;
    auto name = [&](std::string_view hf, std::string_view gg) { return names.Layer(i, hf, gg); };
    SY_ASSIGN_OR_RETURN(l.attn_norm, loader.Load(name("input_layernorm.weight", "attn_norm.weight"),
                                                 Role::kNorm, {d}));
    SY_ASSIGN_OR_RETURN(l.wq, loader.Load(name("self_attn.q_proj.weight", "attn_q.weight"),
                                          Role::kMatrix, {q_rows, d}));
    SY_ASSIGN_OR_RETURN(l.wk, loader.Load(name("self_attn.k_proj.weight", "attn_k.weight"),
                                          Role::kMatrix, {kv_rows, d}));
    SY_ASSIGN_OR_RETURN(l.wv, loader.Load(name("self_attn.v_proj.weight", "attn_v.weight"),
                                          Role::kMatrix, {kv_rows, d}));
    SY_ASSIGN_OR_RETURN(l.wo, loader.Load(name("self_attn.o_proj.weight", "attn_output.weight"),
                                          Role::kMatrix, {d, q_rows}));
    if (c.attention_bias) {
      SY_ASSIGN_OR_RETURN(
          l.bq, loader.Load(name("self_attn.q_proj.bias", "attn_q.bias"), Role::kVector, {q_rows}));
      SY_ASSIGN_OR_RETURN(l.bk, loader.Load(name("self_attn.k_proj.bias", "attn_k.bias"),
                                            Role::kVector, {kv_rows}));
      SY_ASSIGN_OR_RETURN(l.bv, loader.Load(name("self_attn.v_proj.bias", "attn_v.bias"),
                                            Role::kVector, {kv_rows}));
    }
    if (c.qk_norm) {
      SY_ASSIGN_OR_RETURN(
          l.q_norm,
          loader.Load(name("self_attn.q_norm.weight", "attn_q_norm.weight"), Role::kNorm, {hd}));
      SY_ASSIGN_OR_RETURN(
          l.k_norm,
          loader.Load(name("self_attn.k_norm.weight", "attn_k_norm.weight"), Role::kNorm, {hd}));
    }
    if (c.sandwich_norms) {
      // Gemma's HF post_attention_layernorm follows attention; its pre-MLP norm has a name
      // of its own.
      SY_ASSIGN_OR_RETURN(l.post_attn_norm, loader.Load(name("post_attention_layernorm.weight",
                                                             "post_attention_norm.weight"),
                                                        Role::kNorm, {d}));
      SY_ASSIGN_OR_RETURN(l.ffn_norm,
                          loader.Load(name("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
                                      Role::kNorm, {d}));
      SY_ASSIGN_OR_RETURN(l.post_ffn_norm, loader.Load(name("post_feedforward_layernorm.weight",
                                                            "post_ffw_norm.weight"),
                                                       Role::kNorm, {d}));
    } else {
      SY_ASSIGN_OR_RETURN(l.ffn_norm,
                          loader.Load(name("post_attention_layernorm.weight", "ffn_norm.weight"),
                                      Role::kNorm, {d}));
    }
    if (c.num_experts > 0) {
      SY_RETURN_IF_ERROR(LoadExperts(loader, names, c, i, &l));
      w->layers.push_back(std::move(l));
      continue;
    }
    SY_ASSIGN_OR_RETURN(l.w_gate, loader.Load(name("mlp.gate_proj.weight", "ffn_gate.weight"),
                                              Role::kMatrix, {f, d}));
    SY_ASSIGN_OR_RETURN(
        l.w_up, loader.Load(name("mlp.up_proj.weight", "ffn_up.weight"), Role::kMatrix, {f, d}));
    SY_ASSIGN_OR_RETURN(l.w_down, loader.Load(name("mlp.down_proj.weight", "ffn_down.weight"),
                                              Role::kMatrix, {d, f}));
    w->layers.push_back(std::move(l));
  }
  SY_ASSIGN_OR_RETURN(w->final_norm, loader.Load(names.FinalNorm(), Role::kNorm, {d}));
  if (c.tie_word_embeddings) {
    w->lm_head = w->embed;
  } else {
    SY_ASSIGN_OR_RETURN(w->lm_head, loader.Load(names.LmHead(), Role::kMatrix, {c.vocab_size, d}));
  }
  SY_RETURN_IF_ERROR(SetRope(files, w.get()));
  // The matrices MatMul reads, in the backend's own layout where it has a faster one.
  std::vector<runtime::Tensor> matrices{w->lm_head};
  for (const LayerWeights& l : w->layers) {
    if (l.router.has_value()) {
      for (const auto* experts : {&l.expert_gate, &l.expert_up, &l.expert_down})
        matrices.insert(matrices.end(), experts->begin(), experts->end());
      matrices.insert(matrices.end(), {l.wq, l.wk, l.wv, l.wo});
    } else {
      matrices.insert(matrices.end(), {l.wq, l.wk, l.wv, l.wo, l.w_gate, l.w_up, l.w_down});
    }
  }
  SY_ASSIGN_OR_RETURN(w->packed, backend->PackMatMulWeights(matrices));
  w->load.packed_bytes = w->packed.size_bytes();
  w->load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return w;
}

}  // namespace switchyard::model
