#include "model/llama_graph.h"

#include <cmath>

#include "base/status_macros.h"

namespace switchyard::model {
namespace {

using RtDType = runtime::DType;
using runtime::Tensor;

const Tensor* Opt(const std::optional<Tensor>& t) {
  return t.has_value() ? &*t : nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Activations>> AllocateActivations(runtime::Backend* backend,
                                                                 const ModelConfig& c,
                                                                 int64_t max_tokens,
                                                                 int64_t max_logit_rows) {
  auto a = std::make_unique<Activations>();
  auto make = [&](RtDType dtype, std::initializer_list<int64_t> shape) -> absl::StatusOr<Tensor> {
    int64_t elems = 1;
    for (int64_t dim : shape)
      elems *= dim;
    SY_ASSIGN_OR_RETURN(runtime::Buffer buffer, backend->Allocate(runtime::RowBytes(dtype, elems)));
    Tensor t = buffer.View(dtype, shape);
    a->buffers.push_back(std::move(buffer));
    return t;
  };
  const int64_t t = max_tokens;
  const int64_t r = max_logit_rows;
  const int64_t hd = c.head_dim;
  SY_ASSIGN_OR_RETURN(a->tokens, make(RtDType::kI32, {t}));
  SY_ASSIGN_OR_RETURN(a->positions, make(RtDType::kI32, {t}));
  SY_ASSIGN_OR_RETURN(a->slots, make(RtDType::kI32, {t}));
  SY_ASSIGN_OR_RETURN(a->rows, make(RtDType::kI32, {r}));
  SY_ASSIGN_OR_RETURN(a->x, make(RtDType::kF32, {t, c.hidden_size}));
  SY_ASSIGN_OR_RETURN(a->h, make(RtDType::kF32, {t, c.hidden_size}));
  SY_ASSIGN_OR_RETURN(a->q, make(RtDType::kF32, {t, c.num_attention_heads * hd}));
  SY_ASSIGN_OR_RETURN(a->k, make(RtDType::kF32, {t, c.num_key_value_heads * hd}));
  SY_ASSIGN_OR_RETURN(a->v, make(RtDType::kF32, {t, c.num_key_value_heads * hd}));
  SY_ASSIGN_OR_RETURN(a->attn, make(RtDType::kF32, {t, c.num_attention_heads * hd}));
  SY_ASSIGN_OR_RETURN(a->proj, make(RtDType::kF32, {t, c.hidden_size}));
  SY_ASSIGN_OR_RETURN(a->gate, make(RtDType::kF32, {t, c.intermediate_size}));
  SY_ASSIGN_OR_RETURN(a->up, make(RtDType::kF32, {t, c.intermediate_size}));
  SY_ASSIGN_OR_RETURN(a->last, make(RtDType::kF32, {r, c.hidden_size}));
  SY_ASSIGN_OR_RETURN(a->logits, make(RtDType::kF32, {r, c.vocab_size}));
  if (c.num_experts > 0) {
    SY_ASSIGN_OR_RETURN(a->moe, AllocateMoeActivations(backend, c, t));
  }
  return a;
}

absl::Status Embed(runtime::Backend* backend, const LlamaWeights& w, const StepViews& step,
                   Activations* a) {
  const Tensor x = a->x.Slice(0, step.n);
  SY_RETURN_IF_ERROR(backend->Embedding(w.embed, a->tokens.Slice(0, step.n), x));
  if (w.config.embed_scale == 1.0)
    return absl::OkStatus();
  return backend->Scale(x, static_cast<float>(w.config.embed_scale), x);
}

absl::Status DecoderLayer(runtime::Backend* backend, const LlamaWeights& w, int64_t layer,
                          const runtime::RopeTable& rope, const Tensor& k_pool,
                          const Tensor& v_pool, const StepViews& step, Activations* a) {
  const LayerWeights& l = w.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = w.config;
  const int64_t n = step.n;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const Tensor x = a->x.Slice(0, n);
  const Tensor h = a->h.Slice(0, n);
  // Projections write [n, heads * hd]; rotary, KV and attention kernels see [n, heads, hd].
  const Tensor q = a->q.Slice(0, n);
  const Tensor k = a->k.Slice(0, n);
  const Tensor v = a->v.Slice(0, n);
  const Tensor attn = a->attn.Slice(0, n);
  const Tensor q3 = q.Reshaped({n, c.num_attention_heads, c.head_dim});
  const Tensor k3 = k.Reshaped({n, c.num_key_value_heads, c.head_dim});
  const Tensor v3 = v.Reshaped({n, c.num_key_value_heads, c.head_dim});
  const Tensor attn3 = attn.Reshaped({n, c.num_attention_heads, c.head_dim});
  const Tensor proj = a->proj.Slice(0, n);
  const Tensor positions = a->positions.Slice(0, n);

  // Attention block.
  SY_RETURN_IF_ERROR(backend->RmsNorm(x, l.attn_norm, eps, h));
  const runtime::Backend::MatMulTerm qkv[] = {
      {&l.wq, Opt(l.bq), &q}, {&l.wk, Opt(l.bk), &k}, {&l.wv, Opt(l.bv), &v}};
  SY_RETURN_IF_ERROR(backend->MatMuls(h, qkv));
  if (l.q_norm.has_value()) {
    // Qwen3: RMSNorm over each head's vector before the rotation.
    const Tensor q_heads = q.Reshaped({n * c.num_attention_heads, c.head_dim});
    const Tensor k_heads = k.Reshaped({n * c.num_key_value_heads, c.head_dim});
    SY_RETURN_IF_ERROR(backend->RmsNorm(q_heads, *l.q_norm, eps, q_heads));
    SY_RETURN_IF_ERROR(backend->RmsNorm(k_heads, *l.k_norm, eps, k_heads));
  }
  SY_RETURN_IF_ERROR(backend->Rope(rope, q3, positions));
  SY_RETURN_IF_ERROR(backend->Rope(rope, k3, positions));
  SY_RETURN_IF_ERROR(backend->WriteKv(k3, v3, a->slots.Slice(0, n), k_pool, v_pool));
  const double scalar =
      c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim);
  const auto scale = static_cast<float>(1.0 / std::sqrt(scalar));
  SY_RETURN_IF_ERROR(backend->PagedAttention(q3, k_pool, v_pool, step.sequences, scale,
                                             LayerWindow(c, layer), attn3));
  SY_RETURN_IF_ERROR(backend->MatMul(attn, l.wo, nullptr, proj));
  if (l.post_attn_norm.has_value())
    SY_RETURN_IF_ERROR(backend->RmsNorm(proj, *l.post_attn_norm, eps, proj));
  SY_RETURN_IF_ERROR(backend->Add(x, proj, x));

  // MLP block.
  const Tensor gate = a->gate.Slice(0, n);
  const Tensor up = a->up.Slice(0, n);
  SY_RETURN_IF_ERROR(backend->RmsNorm(x, l.ffn_norm, eps, h));
  if (l.router.has_value()) {
    SY_RETURN_IF_ERROR(MoeFfn(backend, c, l, n, h, proj, a->moe.get()));
    return backend->Add(x, proj, x);
  }
  const runtime::Backend::MatMulTerm gate_up[] = {{&l.w_gate, nullptr, &gate},
                                                  {&l.w_up, nullptr, &up}};
  SY_RETURN_IF_ERROR(backend->MatMuls(h, gate_up));
  if (c.hidden_act == MlpActivation::kGeluTanh) {
    SY_RETURN_IF_ERROR(backend->GeluTanhGlu(gate, up, gate));
  } else {
    SY_RETURN_IF_ERROR(backend->SwiGlu(gate, up, gate));
  }
  SY_RETURN_IF_ERROR(backend->MatMul(gate, l.w_down, nullptr, proj));
  if (l.post_ffn_norm.has_value())
    SY_RETURN_IF_ERROR(backend->RmsNorm(proj, *l.post_ffn_norm, eps, proj));
  return backend->Add(x, proj, x);
}

absl::Status Head(runtime::Backend* backend, const LlamaWeights& w, const StepViews& step,
                  Activations* a) {
  const Tensor last = a->last.Slice(0, step.r);
  // An F32 Embedding is a row gather: only the rows that want logits go through the head.
  SY_RETURN_IF_ERROR(backend->Embedding(a->x, a->rows.Slice(0, step.r), last));
  SY_RETURN_IF_ERROR(
      backend->RmsNorm(last, w.final_norm, static_cast<float>(w.config.rms_norm_eps), last));
  const Tensor logits = a->logits.Slice(0, step.r);
  SY_RETURN_IF_ERROR(backend->MatMul(last, w.lm_head, nullptr, logits));
  if (!w.config.final_logit_softcapping.has_value())
    return absl::OkStatus();
  return backend->SoftCap(logits, static_cast<float>(*w.config.final_logit_softcapping), logits);
}

absl::Status Step(runtime::Backend* backend, const LlamaWeights& w, const StepRopes& ropes,
                  const KvCacheStorage& kv, const StepViews& step, Activations* a) {
  SY_RETURN_IF_ERROR(Embed(backend, w, step, a));
  for (int64_t layer = 0; layer < w.config.num_hidden_layers; ++layer) {
    const bool local = ropes.local != nullptr && LayerWindow(w.config, layer) > 0;
    SY_RETURN_IF_ERROR(DecoderLayer(backend, w, layer, local ? *ropes.local : *ropes.global,
                                    kv.k_pool(layer), kv.v_pool(layer), step, a));
  }
  if (step.r == 0)
    return absl::OkStatus();
  return Head(backend, w, step, a);
}

}  // namespace switchyard::model
