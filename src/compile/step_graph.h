// StepGraph: one model step for one shape bucket, as the ordered backend ops it runs (the
// compiled mode's IR). Recorded from the model definition the eager mode runs
// (model/llama_graph.h's Step) by GraphRecorder, so there is one definition and two modes.
//
// Operands name memory symbolically, never by address: a value is a step input (token ids,
// positions, KV slots, logit rows), a weight (by its place in the model, "layers.3.wq"), a
// KV pool (one per layer and K/V; its block count is the engine's, not the graph's) or an
// activation buffer; a TensorRef is a view into a value at a byte offset with a dtype and
// a shape. The per-step attention metadata (which tokens are which sequence's, their block
// tables) is an input of every PagedAttention node, not part of the graph.
//
// Canonical() is a deterministic text form (no pointers, no paths): equal graphs give
// equal text, and Digest() (SHA-256 of it, hex) is the graph's part of a compile-cache key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compile/row_kernels.h"
#include "runtime/backend.h"
#include "runtime/dtype.h"
#include "runtime/rope.h"

namespace switchyard::compile {

enum class ValueKind : uint8_t { kInput, kWeight, kKvPool, kActivation };

std::string_view ValueKindName(ValueKind kind);

struct GraphValue {
  ValueKind kind = ValueKind::kActivation;
  std::string name;  // unique within a graph
  size_t size_bytes = 0;
};

// A view of `value` from byte `offset`: dtype and shape (outermost first). A KV pool's
// outermost dimension (its blocks) is the engine's: recorded, but not part of the identity.
struct TensorRef {
  int32_t value = -1;  // -1: no operand (an absent bias)
  size_t offset = 0;
  runtime::DType dtype = runtime::DType::kF32;
  std::vector<int64_t> shape;

  bool present() const { return value >= 0; }
  friend bool operator==(const TensorRef&, const TensorRef&) = default;
};

enum class StepOp : uint8_t {
  kEmbedding,       // in: table, ids            out: out
  kRmsNorm,         // in: x, weight             out: out        scalar: eps
  kRope,            // in: x, positions          out: x          rope: table index
  kMatMul,          // in: x, w, bias?           out: out        path
  kSwiGlu,          // in: gate, up              out: out
  kGeluTanhGlu,     // in: gate, up              out: out
  kScale,           // in: x                     out: out        scalar: factor
  kSoftCap,         // in: x                     out: out        scalar: cap
  kAdd,             // in: a, b                  out: out
  kWriteKv,         // in: k, v, slots           out: k_pool, v_pool
  kPagedAttention,  // in: q, k_pool, v_pool     out: out        scalar: scale; window
  kRowKernel,       // in, out: as its kernel's spec says (row_kernels.h)   kernel
};

std::string_view StepOpName(StepOp op);
std::string_view MatMulPathName(runtime::MatMulPath path);  // "auto", "streaming", "panel"

struct StepNode {
  StepOp op = StepOp::kAdd;
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  float scalar = 0.0f;
  int64_t window = 0;
  int32_t rope = -1;                                      // index into StepGraph::ropes
  runtime::MatMulPath path = runtime::MatMulPath::kAuto;  // kMatMul: the shape asked for
  int32_t kernel = -1;                                    // kRowKernel: index into kernels
};

struct StepGraph {
  std::vector<GraphValue> values;
  std::vector<runtime::RopeParams> ropes;
  // Generated kernels (fusion.h puts them here), each named by its spec.
  std::vector<RowKernelSpec> kernels;
  std::vector<StepNode> nodes;

  // Index of the value named `name`, or -1.
  int32_t Find(std::string_view name) const;
  std::string Canonical() const;
  // Lower-case hex SHA-256 of Canonical().
  std::string Digest() const;
};

}  // namespace switchyard::compile
