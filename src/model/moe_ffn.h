// The mixture-of-experts MLP of one layer (Qwen3-MoE), batched over a step's tokens:
// route (router MatMul, softmax + top-k), gather the rows routed to each expert into one
// contiguous block per expert, run each expert as GEMMs over its block (one MatMul per
// projection per expert per layer, however many tokens chose it), and scatter the
// weighted results back to their tokens.
//
// The per-expert row counts decide the GEMM shapes, so the routing is read back to the
// host once per MoE layer (a synchronization point on an asynchronous backend) and the
// gather plan is built there with a counting sort, into buffers allocated up front.
// Called by DecoderLayer on the thread that drives the backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "model/weights.h"
#include "runtime/backend.h"

namespace switchyard::model {

// Scratch for one MoE layer of at most max_tokens tokens, reused by every layer.
struct MoeActivations {
  std::vector<runtime::Buffer> buffers;
  runtime::Tensor logits;         // F32 [T, E] router logits
  runtime::Tensor route_ids;      // I32 [T, k] chosen experts per token
  runtime::Tensor route_weights;  // F32 [T, k] their weights
  runtime::Tensor rows;           // I32 [T*k] token of each gathered row, grouped by expert
  runtime::Tensor row_weights;    // F32 [T*k] the routing weight of each gathered row
  runtime::Tensor x;              // F32 [T*k, d] gathered inputs
  runtime::Tensor gate;           // F32 [T*k, fe]
  runtime::Tensor up;             // F32 [T*k, fe]
  runtime::Tensor y;              // F32 [T*k, d] expert outputs
  // Host side of the plan.
  std::vector<int32_t> host_ids;
  std::vector<float> host_weights;
  std::vector<int32_t> host_rows;
  std::vector<float> host_row_weights;
  std::vector<int64_t> offsets;  // [E + 1]: expert e's rows are [offsets[e], offsets[e+1])
  std::vector<int64_t> cursor;   // [E]: next free row of each expert while sorting
};

absl::StatusOr<std::unique_ptr<MoeActivations>> AllocateMoeActivations(runtime::Backend* backend,
                                                                       const ModelConfig& config,
                                                                       int64_t max_tokens);

// out[:n] = the layer's MoE MLP applied to h[:n]. REQUIRES: l has a router and experts,
// n <= the max_tokens `a` was allocated for; out does not alias h.
absl::Status MoeFfn(runtime::Backend* backend, const ModelConfig& config, const LayerWeights& l,
                    int64_t n, const runtime::Tensor& h, const runtime::Tensor& out,
                    MoeActivations* a);

}  // namespace switchyard::model
