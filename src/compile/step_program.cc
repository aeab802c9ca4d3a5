#include "compile/step_program.h"

#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::compile {

StepProgram::StepProgram(StepGraph graph, runtime::Backend* backend,
                         std::shared_ptr<const KernelLibrary> kernels)
    : graph_(std::move(graph)), backend_(backend), kernels_(std::move(kernels)) {}

absl::StatusOr<std::unique_ptr<StepProgram>> StepProgram::Create(
    StepGraph graph, runtime::Backend* backend, const ExternalResolver& resolve,
    std::span<const std::string_view> outputs, std::shared_ptr<const KernelLibrary> kernels) {
  auto program =
      std::unique_ptr<StepProgram>(new StepProgram(std::move(graph), backend, std::move(kernels)));
  SY_RETURN_IF_ERROR(program->Bind(resolve, outputs));
  return program;
}

absl::Status StepProgram::Bind(const ExternalResolver& resolve,
                               std::span<const std::string_view> outputs) {
  plan_ = PlanArena(graph_, outputs);
  SY_ASSIGN_OR_RETURN(arena_, backend_->Allocate(std::max<size_t>(plan_.size_bytes, 1)));
  // Zeroed: a node run alone (tuning) must not meet NaNs or denormals that slow it down.
  const std::vector<std::byte> zeros(arena_.size_bytes());
  SY_RETURN_IF_ERROR(backend_->CopyToDevice(
      zeros.data(), arena_.View(runtime::DType::kI32,
                                {static_cast<int64_t>(arena_.size_bytes() / sizeof(int32_t))})));
  externals_.resize(graph_.values.size());
  for (size_t v = 0; v < graph_.values.size(); ++v) {
    const GraphValue& value = graph_.values[v];
    if (value.kind != ValueKind::kWeight && value.kind != ValueKind::kKvPool)
      continue;
    SY_ASSIGN_OR_RETURN(externals_[v], resolve(value));
    // A pool's block count is the engine's; a weight must be the very one recorded.
    if (value.kind == ValueKind::kWeight && externals_[v].size_bytes() != value.size_bytes) {
      return absl::InvalidArgumentError(
          fmt::format("step program: weight {} is {} bytes; the graph was recorded with {}",
                      value.name, externals_[v].size_bytes(), value.size_bytes));
    }
  }
  for (const runtime::RopeParams& params : graph_.ropes) {
    SY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::RopeTable> table,
                        backend_->CreateRopeTable(params));
    ropes_.push_back(std::move(table));
  }
  const auto tensor = [this](const TensorRef& ref) -> absl::StatusOr<runtime::Tensor> {
    if (!ref.present())
      return runtime::Tensor();
    const auto v = static_cast<size_t>(ref.value);
    const GraphValue& value = graph_.values[v];
    if (value.kind == ValueKind::kKvPool)
      return externals_[v];  // the whole pool, whatever its block count
    const runtime::Tensor view(ref.dtype, ref.shape, nullptr);
    if (ref.offset + view.size_bytes() > value.size_bytes) {
      return absl::InvalidArgumentError(
          fmt::format("step program: a {} operand at byte {} runs past {} ({} bytes)",
                      view.DebugString(), ref.offset, value.name, value.size_bytes));
    }
    auto* base =
        static_cast<std::byte*>(value.kind == ValueKind::kWeight
                                    ? externals_[v].data()
                                    : static_cast<std::byte*>(arena_.data()) + *plan_.offsets[v]);
    return runtime::Tensor(ref.dtype, ref.shape, base + ref.offset);
  };
  for (const StepNode& node : graph_.nodes) {
    if (node.rope >= static_cast<int32_t>(ropes_.size()))
      return absl::InvalidArgumentError("step program: a rope node names no table");
    if (node.op == StepOp::kRowKernel) {
      const auto k = static_cast<size_t>(node.kernel);
      if (node.kernel < 0 || k >= graph_.kernels.size() || kernels_ == nullptr ||
          k >= kernels_->size() ||
          node.inputs.size() != static_cast<size_t>(RowKernelInputs(graph_.kernels[k])) ||
          node.outputs.size() != static_cast<size_t>(RowKernelOutputs(graph_.kernels[k]))) {
        return absl::InvalidArgumentError(
            "step program: a row kernel node without its kernel or with other operands");
      }
    }
    BoundNode b{&node, {}, {}, node.path, {}};
    for (const TensorRef& ref : node.inputs) {
      SY_ASSIGN_OR_RETURN(runtime::Tensor t, tensor(ref));
      b.in.push_back(t);
    }
    for (const TensorRef& ref : node.outputs) {
      SY_ASSIGN_OR_RETURN(runtime::Tensor t, tensor(ref));
      b.out.push_back(t);
    }
    if (node.op == StepOp::kRowKernel) {
      for (const std::vector<runtime::Tensor>* side : {&b.in, &b.out}) {
        for (const runtime::Tensor& t : *side)
          b.operands.push_back(t.data());
      }
    }
    bound_.push_back(std::move(b));
  }
  return absl::OkStatus();
}

absl::StatusOr<runtime::Tensor> StepProgram::View(std::string_view name, runtime::DType dtype,
                                                  std::initializer_list<int64_t> shape) const {
  const int32_t v = graph_.Find(name);
  if (v < 0 || !plan_.offsets[static_cast<size_t>(v)].has_value())
    return absl::NotFoundError(fmt::format("step program: no input or activation {}", name));
  const GraphValue& value = graph_.values[static_cast<size_t>(v)];
  const runtime::Tensor view(
      dtype, shape,
      static_cast<std::byte*>(arena_.data()) + *plan_.offsets[static_cast<size_t>(v)]);
  if (view.size_bytes() > value.size_bytes) {
    return absl::InvalidArgumentError(fmt::format("step program: a {} view of {} ({} bytes)",
                                                  view.DebugString(), name, value.size_bytes));
  }
  return view;
}

absl::Status StepProgram::Run(std::span<const runtime::AttentionSequence> sequences) {
  for (const BoundNode& b : bound_)
    SY_RETURN_IF_ERROR(RunNode(b, sequences));
  return absl::OkStatus();
}

absl::Status StepProgram::RunNode(const BoundNode& b,
                                  std::span<const runtime::AttentionSequence> sequences) {
  const StepNode& n = *b.node;
  const std::vector<runtime::Tensor>& in = b.in;
  const runtime::Tensor& out = b.out[0];
  switch (n.op) {
    case StepOp::kEmbedding:
      return backend_->Embedding(in[0], in[1], out);
    case StepOp::kRmsNorm:
      return backend_->RmsNorm(in[0], in[1], n.scalar, out);
    case StepOp::kRope:
      return backend_->Rope(*ropes_[static_cast<size_t>(n.rope)], in[0], in[1]);
    case StepOp::kMatMul:
      return backend_->MatMulOnPath(in[0], in[1], n.inputs[2].present() ? &in[2] : nullptr, out,
                                    b.path);
    case StepOp::kSwiGlu:
      return backend_->SwiGlu(in[0], in[1], out);
    case StepOp::kGeluTanhGlu:
      return backend_->GeluTanhGlu(in[0], in[1], out);
    case StepOp::kScale:
      return backend_->Scale(in[0], n.scalar, out);
    case StepOp::kSoftCap:
      return backend_->SoftCap(in[0], n.scalar, out);
    case StepOp::kAdd:
      return backend_->Add(in[0], in[1], out);
    case StepOp::kWriteKv:
      return backend_->WriteKv(in[0], in[1], in[2], b.out[0], b.out[1]);
    case StepOp::kPagedAttention:
      return backend_->PagedAttention(in[0], in[1], in[2], sequences, n.scalar, n.window, out);
    case StepOp::kRowKernel: {
      const auto k = static_cast<size_t>(n.kernel);
      const RowKernelSpec& spec = graph_.kernels[k];
      return backend_->RunRowKernel(kernels_->kernel(k), b.operands,
                                    in[0].num_elements() / spec.cols, RowKernelWork(spec));
    }
  }
  return absl::InternalError("step program: an unknown op");
}

}  // namespace switchyard::compile
