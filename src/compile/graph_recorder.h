// GraphRecorder: a runtime::Backend that runs nothing and writes down every kernel call as a
// StepGraph node, so the model code eager mode runs (model/llama_graph.h) also yields the
// compiled mode's graph.
//
// Memory: Allocate hands out address ranges reserved with no access (touching one faults),
// so recording allocates nothing real and no recorded address can collide with real
// memory. Memory from elsewhere (weights loaded on a compute backend) is made
// known with Bind. Every operand of a kernel call must lie inside an allocated or bound
// range; one that does not fails that call with InvalidArgument. Name() gives a value its
// kind and name (allocations start as activations "a0", "a1", ...).
//
// A step that reads results back to the host mid-step (MoE routing: CopyToHost) or copies
// cannot be recorded: those calls return Unimplemented, and such a step runs eagerly.
// Threads: like any Backend, one thread drives it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "compile/step_graph.h"
#include "runtime/backend.h"

namespace switchyard::compile {

class GraphRecorder final : public runtime::Backend {
 public:
  static absl::StatusOr<std::unique_ptr<GraphRecorder>> Create();
  ~GraphRecorder() override;
  GraphRecorder(const GraphRecorder&) = delete;
  GraphRecorder& operator=(const GraphRecorder&) = delete;

  // Makes the memory of `tensor` (from another backend) the value `name` of `kind`; a
  // range bound before (a tied lm_head is the embedding) keeps its first name.
  // InvalidArgument when it overlaps another range only in part, or the name is taken.
  absl::Status Bind(ValueKind kind, std::string name, const runtime::Tensor& tensor);
  // Renames the value `tensor` starts in and sets its kind (step inputs, KV pools).
  absl::Status Name(const runtime::Tensor& tensor, ValueKind kind, std::string name);

  // The graph so far.
  const StepGraph& graph() const { return graph_; }

  std::string_view name() const override { return "recorder"; }
  absl::StatusOr<runtime::Buffer> Allocate(size_t size_bytes) override;
  absl::StatusOr<runtime::Buffer> WrapHost(const void* host, size_t size_bytes) override;
  absl::Status CopyToDevice(const void* host, const runtime::Tensor& dst) override;
  absl::Status CopyToHost(const runtime::Tensor& src, void* host) override;
  absl::Status Copy(const runtime::Tensor& src, const runtime::Tensor& dst) override;
  absl::Status Synchronize() override;

  absl::Status Embedding(const runtime::Tensor& table, const runtime::Tensor& ids,
                         const runtime::Tensor& out) override;
  absl::Status RmsNorm(const runtime::Tensor& x, const runtime::Tensor& weight, float eps,
                       const runtime::Tensor& out) override;
  absl::StatusOr<std::unique_ptr<runtime::RopeTable>> CreateRopeTable(
      const runtime::RopeParams& params) override;
  absl::Status Rope(const runtime::RopeTable& table, const runtime::Tensor& x,
                    const runtime::Tensor& positions) override;
  absl::Status MatMul(const runtime::Tensor& x, const runtime::Tensor& w,
                      const runtime::Tensor* bias, const runtime::Tensor& out) override;
  absl::Status MatMulOnPath(const runtime::Tensor& x, const runtime::Tensor& w,
                            const runtime::Tensor* bias, const runtime::Tensor& out,
                            runtime::MatMulPath path) override;
  // The recorder runs no kernel: its paths never differ, and it packs nothing.
  bool MatMulPathsDiffer(const runtime::Tensor& /*w*/, int64_t /*rows*/) const override {
    return false;
  }
  absl::StatusOr<runtime::Buffer> PackMatMulWeights(
      std::span<const runtime::Tensor> /*weights*/) override {
    return runtime::Buffer();
  }
  absl::Status SwiGlu(const runtime::Tensor& gate, const runtime::Tensor& up,
                      const runtime::Tensor& out) override;
  absl::Status GeluTanhGlu(const runtime::Tensor& gate, const runtime::Tensor& up,
                           const runtime::Tensor& out) override;
  absl::Status Scale(const runtime::Tensor& x, float factor, const runtime::Tensor& out) override;
  absl::Status SoftCap(const runtime::Tensor& x, float cap, const runtime::Tensor& out) override;
  absl::Status MoeRoute(const runtime::Tensor& logits, int64_t top_k, bool normalize,
                        const runtime::Tensor& expert_ids, const runtime::Tensor& weights) override;
  absl::Status MoeScatterAdd(const runtime::Tensor& y, const runtime::Tensor& rows,
                             const runtime::Tensor& weights, const runtime::Tensor& out) override;
  absl::Status Add(const runtime::Tensor& a, const runtime::Tensor& b,
                   const runtime::Tensor& out) override;
  absl::Status WriteKv(const runtime::Tensor& k, const runtime::Tensor& v,
                       const runtime::Tensor& slot_ids, const runtime::Tensor& k_pool,
                       const runtime::Tensor& v_pool) override;
  absl::Status PagedAttention(const runtime::Tensor& q, const runtime::Tensor& k_pool,
                              const runtime::Tensor& v_pool,
                              std::span<const runtime::AttentionSequence> sequences, float scale,
                              int64_t window, const runtime::Tensor& out) override;

 private:
  struct Range {
    uintptr_t end = 0;
    int32_t value = -1;
  };

  GraphRecorder() = default;
  absl::StatusOr<TensorRef> Ref(const runtime::Tensor& tensor) const;
  // Appends a node of `op` over `inputs` and `outputs` (null entries: absent operands).
  absl::Status Record(StepOp op, std::initializer_list<const runtime::Tensor*> inputs,
                      std::initializer_list<const runtime::Tensor*> outputs, float scalar = 0.0f,
                      int64_t window = 0, int32_t rope = -1,
                      runtime::MatMulPath path = runtime::MatMulPath::kAuto);

  std::map<uintptr_t, Range> ranges_;  // by start address
  StepGraph graph_;
};

}  // namespace switchyard::compile
