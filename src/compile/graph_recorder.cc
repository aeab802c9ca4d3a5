#include "compile/graph_recorder.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::compile {
namespace {

// What GraphRecorder::CreateRopeTable returns: the parameters and the graph's index.
class RecordedRope final : public runtime::RopeTable {
 public:
  RecordedRope(runtime::RopeParams params, int32_t index)
      : params_(std::move(params)), index_(index) {}
  const runtime::RopeParams& params() const override { return params_; }
  int32_t index() const { return index_; }

 private:
  runtime::RopeParams params_;
  int32_t index_;
};

absl::Status NotRecordable(std::string_view what) {
  return absl::UnimplementedError(
      fmt::format("graph recorder: a step that {} cannot be recorded; it runs eagerly", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GraphRecorder>> GraphRecorder::Create() {
  return std::unique_ptr<GraphRecorder>(new GraphRecorder());
}

GraphRecorder::~GraphRecorder() = default;

absl::StatusOr<runtime::Buffer> GraphRecorder::Allocate(size_t size_bytes) {
  // Addresses only: a range of its own per buffer, no access, no memory behind it.
  const size_t reserved = std::max<size_t>(size_bytes, 1);
  void* data =
      mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        fmt::format("graph recorder: reserving {} bytes of addresses: {}", reserved,
                    std::error_code(errno, std::generic_category()).message()));
  }
  const auto start = reinterpret_cast<uintptr_t>(data);
  const auto value = static_cast<int32_t>(graph_.values.size());
  graph_.values.push_back(
      {ValueKind::kActivation, fmt::format("a{}", graph_.values.size()), size_bytes});
  ranges_[start] = {start + size_bytes, value};
  return runtime::Buffer(data, size_bytes, runtime::MemorySpace::kDevice,
                         [reserved](void* p, size_t) { munmap(p, reserved); });
}

absl::Status GraphRecorder::Bind(ValueKind kind, std::string name, const runtime::Tensor& tensor) {
  const auto start = reinterpret_cast<uintptr_t>(tensor.data());
  const uintptr_t end = start + tensor.size_bytes();
  auto next = ranges_.upper_bound(start);
  if (next != ranges_.begin()) {
    const auto& [prev_start, prev] = *std::prev(next);
    if (prev_start == start && prev.end == end)
      return absl::OkStatus();  // the same memory under another name: the first one stays
    if (prev.end > start) {
      return absl::InvalidArgumentError(
          fmt::format("graph recorder: {} overlaps {}", name,
                      graph_.values[static_cast<size_t>(prev.value)].name));
    }
  }
  if (next != ranges_.end() && next->first < end) {
    return absl::InvalidArgumentError(
        fmt::format("graph recorder: {} overlaps {}", name,
                    graph_.values[static_cast<size_t>(next->second.value)].name));
  }
  if (graph_.Find(name) >= 0)
    return absl::InvalidArgumentError(fmt::format("graph recorder: {} is bound twice", name));
  const auto value = static_cast<int32_t>(graph_.values.size());
  graph_.values.push_back({kind, std::move(name), tensor.size_bytes()});
  ranges_[start] = {end, value};
  return absl::OkStatus();
}

absl::Status GraphRecorder::Name(const runtime::Tensor& tensor, ValueKind kind, std::string name) {
  SY_ASSIGN_OR_RETURN(const TensorRef ref, Ref(tensor));
  const int32_t taken = graph_.Find(name);
  if (taken >= 0 && taken != ref.value)
    return absl::InvalidArgumentError(fmt::format("graph recorder: {} is named twice", name));
  GraphValue& value = graph_.values[static_cast<size_t>(ref.value)];
  value.kind = kind;
  value.name = std::move(name);
  return absl::OkStatus();
}

absl::StatusOr<TensorRef> GraphRecorder::Ref(const runtime::Tensor& tensor) const {
  const auto start = reinterpret_cast<uintptr_t>(tensor.data());
  auto next = ranges_.upper_bound(start);
  if (next != ranges_.begin()) {
    const auto& [range_start, range] = *std::prev(next);
    if (start + tensor.size_bytes() <= range.end) {
      return TensorRef{range.value, start - range_start, tensor.dtype(),
                       std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end())};
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("graph recorder: a {} operand lies outside every allocated or bound range",
                  tensor.DebugString()));
}

absl::Status GraphRecorder::Record(StepOp op, std::initializer_list<const runtime::Tensor*> inputs,
                                   std::initializer_list<const runtime::Tensor*> outputs,
                                   float scalar, int64_t window, int32_t rope,
                                   runtime::MatMulPath path) {
  StepNode node{op, {}, {}, scalar, window, rope, path};
  for (const runtime::Tensor* t : inputs) {
    if (t == nullptr) {
      node.inputs.emplace_back();
      continue;
    }
    SY_ASSIGN_OR_RETURN(TensorRef ref, Ref(*t));
    node.inputs.push_back(std::move(ref));
  }
  for (const runtime::Tensor* t : outputs) {
    SY_ASSIGN_OR_RETURN(TensorRef ref, Ref(*t));
    node.outputs.push_back(std::move(ref));
  }
  graph_.nodes.push_back(std::move(node));
  return absl::OkStatus();
}

absl::StatusOr<runtime::Buffer> GraphRecorder::WrapHost(const void*, size_t) {
  return NotRecordable("wraps host memory");
}

absl::Status GraphRecorder::CopyToDevice(const void*, const runtime::Tensor&) {
  return NotRecordable("copies host data in");
}

absl::Status GraphRecorder::CopyToHost(const runtime::Tensor&, void*) {
  return NotRecordable("reads results back to the host (MoE routing)");
}

absl::Status GraphRecorder::Copy(const runtime::Tensor&, const runtime::Tensor&) {
  return NotRecordable("copies between buffers");
}

absl::Status GraphRecorder::Synchronize() {
  return absl::OkStatus();
}

absl::Status GraphRecorder::Embedding(const runtime::Tensor& table, const runtime::Tensor& ids,
                                      const runtime::Tensor& out) {
  return Record(StepOp::kEmbedding, {&table, &ids}, {&out});
}

absl::Status GraphRecorder::RmsNorm(const runtime::Tensor& x, const runtime::Tensor& weight,
                                    float eps, const runtime::Tensor& out) {
  return Record(StepOp::kRmsNorm, {&x, &weight}, {&out}, eps);
}

absl::StatusOr<std::unique_ptr<runtime::RopeTable>> GraphRecorder::CreateRopeTable(
    const runtime::RopeParams& params) {
  const auto index = static_cast<int32_t>(graph_.ropes.size());
  graph_.ropes.push_back(params);
  return std::make_unique<RecordedRope>(params, index);
}

absl::Status GraphRecorder::Rope(const runtime::RopeTable& table, const runtime::Tensor& x,
                                 const runtime::Tensor& positions) {
  const auto* recorded = dynamic_cast<const RecordedRope*>(&table);
  if (recorded == nullptr) {
    return absl::InvalidArgumentError(
        "graph recorder: Rope with a table another backend made (make it with this recorder)");
  }
  return Record(StepOp::kRope, {&x, &positions}, {&x}, 0.0f, 0, recorded->index());
}

absl::Status GraphRecorder::MatMul(const runtime::Tensor& x, const runtime::Tensor& w,
                                   const runtime::Tensor* bias, const runtime::Tensor& out) {
  return Record(StepOp::kMatMul, {&x, &w, bias}, {&out});
}

absl::Status GraphRecorder::MatMulOnPath(const runtime::Tensor& x, const runtime::Tensor& w,
                                         const runtime::Tensor* bias, const runtime::Tensor& out,
                                         runtime::MatMulPath path) {
  return Record(StepOp::kMatMul, {&x, &w, bias}, {&out}, 0.0f, 0, -1, path);
}

absl::Status GraphRecorder::SwiGlu(const runtime::Tensor& gate, const runtime::Tensor& up,
                                   const runtime::Tensor& out) {
  return Record(StepOp::kSwiGlu, {&gate, &up}, {&out});
}

absl::Status GraphRecorder::GeluTanhGlu(const runtime::Tensor& gate, const runtime::Tensor& up,
                                        const runtime::Tensor& out) {
  return Record(StepOp::kGeluTanhGlu, {&gate, &up}, {&out});
}

absl::Status GraphRecorder::Scale(const runtime::Tensor& x, float factor,
                                  const runtime::Tensor& out) {
  return Record(StepOp::kScale, {&x}, {&out}, factor);
}

absl::Status GraphRecorder::SoftCap(const runtime::Tensor& x, float cap,
                                    const runtime::Tensor& out) {
  return Record(StepOp::kSoftCap, {&x}, {&out}, cap);
}

absl::Status GraphRecorder::MoeRoute(const runtime::Tensor&, int64_t, bool, const runtime::Tensor&,
                                     const runtime::Tensor&) {
  return NotRecordable("routes tokens to experts");
}

absl::Status GraphRecorder::MoeScatterAdd(const runtime::Tensor&, const runtime::Tensor&,
                                          const runtime::Tensor&, const runtime::Tensor&) {
  return NotRecordable("routes tokens to experts");
}

absl::Status GraphRecorder::Add(const runtime::Tensor& a, const runtime::Tensor& b,
                                const runtime::Tensor& out) {
  return Record(StepOp::kAdd, {&a, &b}, {&out});
}

absl::Status GraphRecorder::WriteKv(const runtime::Tensor& k, const runtime::Tensor& v,
                                    const runtime::Tensor& slot_ids, const runtime::Tensor& k_pool,
                                    const runtime::Tensor& v_pool) {
  return Record(StepOp::kWriteKv, {&k, &v, &slot_ids}, {&k_pool, &v_pool});
}

absl::Status GraphRecorder::PagedAttention(const runtime::Tensor& q, const runtime::Tensor& k_pool,
                                           const runtime::Tensor& v_pool,
                                           std::span<const runtime::AttentionSequence>, float scale,
                                           int64_t window, const runtime::Tensor& out) {
  return Record(StepOp::kPagedAttention, {&q, &k_pool, &v_pool}, {&out}, scale, window);
}

}  // namespace switchyard::compile
