// StepProgram: a StepGraph bound to a compute backend and run as one unit. Binding happens
// once: the arena (ArenaPlan) is allocated, every operand of every node becomes a tensor,
// weights and KV pools are found by name, rotary tables are made on the backend. Run()
// then executes the nodes in order with no lookup, allocation or model code in between.
//
// The step's inputs are the arena's "tokens", "positions", "slots" and "rows" (View()),
// written by the caller before Run(); its outputs (e.g. "logits") are read after.
// A step with fewer tokens than the graph's bucket is padded by the caller: token 0 at
// position 0 with slot -1 (WriteKv skips it), covered by no attention sequence, and logit
// rows past the wanted ones repeat row 0 (their logits are ignored).
//
// Threads: like the backend, driven by one thread. Borrows the backend, the weights and the
// KV storage (they outlive the program).
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "compile/arena_plan.h"
#include "compile/kernel_library.h"
#include "compile/step_graph.h"
#include "runtime/backend.h"

namespace switchyard::compile {

// Finds the tensor a weight or KV pool value of the graph names; an error when it has none
// or one of another dtype or size.
using ExternalResolver = std::function<absl::StatusOr<runtime::Tensor>(const GraphValue& value)>;

class StepProgram {
 public:
  // Values named in `outputs` stay readable after Run(). Errors: a value the resolver does
  // not know, an operand that does not fit its value, and the backend's allocation errors.
  // `kernels` runs the graph's row kernels (null for a graph without them); the program
  // keeps it loaded.
  static absl::StatusOr<std::unique_ptr<StepProgram>> Create(
      StepGraph graph, runtime::Backend* backend, const ExternalResolver& resolve,
      std::span<const std::string_view> outputs,
      std::shared_ptr<const KernelLibrary> kernels = nullptr);

  const StepGraph& graph() const { return graph_; }
  runtime::Backend* backend() const { return backend_; }
  const ArenaPlan& plan() const { return plan_; }
  // A view of the input or activation value `name` from its start (NotFound for another
  // name; InvalidArgument when the view is larger than the value).
  absl::StatusOr<runtime::Tensor> View(std::string_view name, runtime::DType dtype,
                                       std::initializer_list<int64_t> shape) const;

  // Runs every node; `sequences` is the step's attention metadata for PagedAttention.
  absl::Status Run(std::span<const runtime::AttentionSequence> sequences);

  // MatMul paths (matmul_tuning.h): node i's path now, and a new one for it; other ops
  // ignore theirs. RunNode runs node i alone, as tuning measures it (PagedAttention over
  // no sequences).
  runtime::MatMulPath path(size_t i) const { return bound_[i].path; }
  void SetPath(size_t i, runtime::MatMulPath path) { bound_[i].path = path; }
  absl::Status RunNode(size_t i) { return RunNode(bound_[i], {}); }
  // Node i's operand j as bound (a rank-0 tensor with no data where absent).
  const runtime::Tensor& input(size_t i, size_t j) const { return bound_[i].in[j]; }

 private:
  struct BoundNode {
    const StepNode* node;
    std::vector<runtime::Tensor> in;  // absent operands: a rank-0 tensor with no data
    std::vector<runtime::Tensor> out;
    runtime::MatMulPath path;
    // kRowKernel: the data of in, then out, as the kernel takes them.
    std::vector<void*> operands;
  };

  StepProgram(StepGraph graph, runtime::Backend* backend,
              std::shared_ptr<const KernelLibrary> kernels);
  absl::Status Bind(const ExternalResolver& resolve, std::span<const std::string_view> outputs);
  absl::Status RunNode(const BoundNode& b, std::span<const runtime::AttentionSequence> sequences);

  StepGraph graph_;
  runtime::Backend* backend_;
  std::shared_ptr<const KernelLibrary> kernels_;
  ArenaPlan plan_;
  runtime::Buffer arena_;
  std::vector<runtime::Tensor> externals_;  // per value: the weight or pool; else empty
  std::vector<std::unique_ptr<runtime::RopeTable>> ropes_;
  std::vector<BoundNode> bound_;
};

}  // namespace switchyard::compile
