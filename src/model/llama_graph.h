// The Llama-family decoder graph, op by op, against runtime::Backend: the one place that
// says which kernels a step runs in which order. Eager mode calls these functions
// directly; a compiled mode can record the same sequence. Called by LlamaModel on the
// thread that drives the backend.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

#include "model/kv_cache_storage.h"
#include "model/moe_ffn.h"
#include "model/weights.h"
#include "runtime/backend.h"

namespace switchyard::model {

// Preallocated device buffers for one step of at most `max_tokens` tokens; views are cut
// to the step's n tokens with Slice.
struct Activations {
  std::vector<runtime::Buffer> buffers;
  runtime::Tensor tokens;               // I32 [T]
  runtime::Tensor positions;            // I32 [T]
  runtime::Tensor slots;                // I32 [T]
  runtime::Tensor rows;                 // I32 [R] logit rows
  runtime::Tensor x;                    // F32 [T, d] residual stream
  runtime::Tensor h;                    // F32 [T, d] normed input of a sublayer
  runtime::Tensor q;                    // F32 [T, heads * hd]
  runtime::Tensor k;                    // F32 [T, kv_heads * hd]
  runtime::Tensor v;                    // F32 [T, kv_heads * hd]
  runtime::Tensor attn;                 // F32 [T, heads * hd]
  runtime::Tensor proj;                 // F32 [T, d] sublayer output
  runtime::Tensor gate;                 // F32 [T, f]
  runtime::Tensor up;                   // F32 [T, f]
  runtime::Tensor last;                 // F32 [R, d] hidden rows that want logits
  runtime::Tensor logits;               // F32 [R, vocab]
  std::unique_ptr<MoeActivations> moe;  // MoE models only
};

// The rotary tables a step uses: `global` for every layer, `local` (may be null) for the
// sliding-window layers when their parameters differ (Gemma 3).
struct StepRopes {
  const runtime::RopeTable* global = nullptr;
  const runtime::RopeTable* local = nullptr;
};

// One step's inputs, already on the device, cut to n tokens and r logit rows.
struct StepViews {
  int64_t n = 0;
  int64_t r = 0;
  std::span<const runtime::AttentionSequence> sequences;
};

absl::StatusOr<std::unique_ptr<Activations>> AllocateActivations(runtime::Backend* backend,
                                                                 const ModelConfig& config,
                                                                 int64_t max_tokens,
                                                                 int64_t max_logit_rows);

// x = embed[tokens] (times config.embed_scale) for the step's n tokens.
absl::Status Embed(runtime::Backend* backend, const LlamaWeights& w, const StepViews& step,
                   Activations* a);

// One decoder layer on the residual stream a->x. A MoE layer reads its routing back to the
// host (see moe_ffn.h). `rope` is the layer's table (Gemma 3's
// sliding layers have their own).
absl::Status DecoderLayer(runtime::Backend* backend, const LlamaWeights& w, int64_t layer,
                          const runtime::RopeTable& rope, const runtime::Tensor& k_pool,
                          const runtime::Tensor& v_pool, const StepViews& step, Activations* a);

// Gathers the rows that want logits, applies the final norm, the lm_head and any final
// logit soft-capping: a->logits.
absl::Status Head(runtime::Backend* backend, const LlamaWeights& w, const StepViews& step,
                  Activations* a);

// The whole step, in order: Embed, every DecoderLayer, then Head when the step wants logit
// rows. Its inputs (a->tokens, positions, slots, rows) are already on the device; the
// logits are left in a->logits. Eager mode runs it on a compute backend; compile/ runs it
// on a recording one.
absl::Status Step(runtime::Backend* backend, const LlamaWeights& w, const StepRopes& ropes,
                  const KvCacheStorage& kv, const StepViews& step, Activations* a);

}  // namespace switchyard::model
