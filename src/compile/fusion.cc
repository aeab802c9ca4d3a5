#include "compile/fusion.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fmt/format.h"

namespace switchyard::compile {
namespace {

using runtime::DType;

int64_t Elements(const TensorRef& ref) {
  int64_t n = 1;
  for (int64_t d : ref.shape)
    n *= d;
  return n;
}

size_t Bytes(const TensorRef& ref) {
  return runtime::RowBytes(ref.dtype, Elements(ref));
}

bool Overlap(const TensorRef& a, const TensorRef& b) {
  return a.present() && b.present() && a.value == b.value && a.offset < b.offset + Bytes(b) &&
         b.offset < a.offset + Bytes(a);
}

// Whether a kernel may write `out` while it reads `in`: other memory, or the very same
// view (each element is read before it is written).
bool AliasesHarmlessly(const TensorRef& out, const TensorRef& in) {
  return !Overlap(out, in) || out == in;
}

bool IsF32Rows(const TensorRef& ref, int64_t elements) {
  return ref.present() && ref.dtype == DType::kF32 && Elements(ref) == elements;
}

// An RmsNorm a row kernel can compute: F32 rows in and out of the same shape, an F32
// weight of one row.
bool NormFusable(const StepNode& norm) {
  const TensorRef& x = norm.inputs[0];
  const TensorRef& w = norm.inputs[1];
  const TensorRef& h = norm.outputs[0];
  if (x.shape.empty() || x.shape.back() <= 0)
    return false;
  const int64_t cols = x.shape.back();
  return IsF32Rows(x, Elements(x)) && IsF32Rows(h, Elements(x)) && h.shape.back() == cols &&
         IsF32Rows(w, cols);
}

// An Add whose output is the norm's input and whose operands fit one residual kernel.
bool AddFusable(const StepNode& add, const StepNode& norm) {
  const TensorRef& s = add.outputs[0];
  const int64_t n = Elements(norm.inputs[0]);
  return s == norm.inputs[0] && IsF32Rows(add.inputs[0], n) && IsF32Rows(add.inputs[1], n);
}

// The nodes after `at` that read h (its output), when all of them are MatMuls that take it
// in BF16 (until a node writes over h); empty otherwise.
std::vector<size_t> Bf16Readers(const StepGraph& graph, size_t at, const TensorRef& h,
                                const runtime::Backend& backend,
                                std::span<const std::string_view> outputs) {
  const GraphValue& value = graph.values[static_cast<size_t>(h.value)];
  if (value.kind != ValueKind::kActivation || h.shape.back() % 2 != 0 ||
      std::find(outputs.begin(), outputs.end(), value.name) != outputs.end()) {
    return {};
  }
  std::vector<size_t> readers;
  for (size_t j = at + 1; j < graph.nodes.size(); ++j) {
    const StepNode& node = graph.nodes[j];
    const bool reads = std::any_of(node.inputs.begin(), node.inputs.end(),
                                   [&](const TensorRef& in) { return Overlap(in, h); });
    if (reads) {
      const bool bf16_matmul = node.op == StepOp::kMatMul && node.inputs[0] == h &&
                               backend.MatMulTakesBf16Activations(node.inputs[1].dtype) &&
                               (node.inputs.size() < 3 || !Overlap(node.inputs[2], h));
      if (!bf16_matmul)
        return {};
      readers.push_back(j);
    }
    if (std::any_of(node.outputs.begin(), node.outputs.end(),
                    [&](const TensorRef& out) { return Overlap(out, h); })) {
      break;
    }
  }
  return readers;
}

// Where node `at` of `graph` (being fused into `fused`) writes its last output h rounded to
// BF16 for the MatMuls that read it, which are made to read it there; nullopt (and nothing
// changed) when some reader needs F32. Rounded rows are half as long, so they take h's own
// bytes only where those are read by no operand of the fused node; else a value of their own.
std::optional<TensorRef> RoundForReaders(StepGraph* graph, size_t at, const StepNode& fused,
                                         const runtime::Backend& backend,
                                         std::span<const std::string_view> outputs) {
  const TensorRef& h = fused.outputs.back();
  const std::vector<size_t> readers = Bf16Readers(*graph, at, h, backend, outputs);
  if (readers.empty())
    return std::nullopt;
  const bool apart = std::none_of(fused.inputs.begin(), fused.inputs.end(),
                                  [&](const TensorRef& in) { return Overlap(in, h); }) &&
                     std::none_of(fused.outputs.begin(), fused.outputs.end() - 1,
                                  [&](const TensorRef& out) { return Overlap(out, h); });
  TensorRef rounded = h;
  rounded.dtype = DType::kBF16;
  if (!apart) {
    const std::string& name = graph->values[static_cast<size_t>(h.value)].name;
    rounded.value = static_cast<int32_t>(graph->values.size());
    rounded.offset = 0;
    graph->values.push_back(
        {ValueKind::kActivation, fmt::format("{}.bf16@{}", name, at), Bytes(rounded)});
  }
  for (size_t j : readers)
    graph->nodes[j].inputs[0] = rounded;
  return rounded;
}

// A SwiGlu a row kernel can compute: F32 gate, up and out of one element count.
bool SwiGluFusable(const StepNode& node) {
  const TensorRef& out = node.outputs[0];
  if (out.shape.empty() || out.shape.back() <= 0)
    return false;
  const int64_t n = Elements(out);
  return IsF32Rows(node.inputs[0], n) && IsF32Rows(node.inputs[1], n) && IsF32Rows(out, n);
}

int32_t KernelIndex(StepGraph* graph, const RowKernelSpec& spec) {
  const auto found = std::find(graph->kernels.begin(), graph->kernels.end(), spec);
  if (found != graph->kernels.end())
    return static_cast<int32_t>(found - graph->kernels.begin());
  graph->kernels.push_back(spec);
  return static_cast<int32_t>(graph->kernels.size() - 1);
}

}  // namespace

StepGraph FuseRowKernels(StepGraph graph, const runtime::Backend& backend,
                         std::span<const std::string_view> outputs) {
  if (!backend.RunsRowKernels())
    return graph;
  std::vector<bool> fused_away(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const StepNode& node = graph.nodes[i];
    RowKernelSpec spec;
    StepNode fused;
    fused.op = StepOp::kRowKernel;
    fused.inputs = node.inputs;
    fused.outputs = node.outputs;
    if (node.op == StepOp::kSwiGlu && SwiGluFusable(node)) {
      // Only worth a kernel of its own where its output is rounded for the MatMul after.
      spec.kind = RowKernelKind::kSwiGlu;
      spec.cols = node.outputs[0].shape.back();
    } else if (node.op == StepOp::kRmsNorm && NormFusable(node)) {
      spec.cols = node.inputs[0].shape.back();
      spec.eps = node.scalar;
      const StepNode* add = i > 0 ? &graph.nodes[i - 1] : nullptr;
      spec.residual =
          add != nullptr && add->op == StepOp::kAdd && !fused_away[i - 1] && AddFusable(*add, node);
      if (spec.residual) {
        fused.inputs = {add->inputs[0], add->inputs[1], node.inputs[1]};
        fused.outputs = {add->outputs[0], node.outputs[0]};
      }
    } else {
      continue;
    }
    // Every output against every operand, and the outputs against each other.
    bool harmless = true;
    for (const TensorRef& out : fused.outputs) {
      for (const TensorRef& in : fused.inputs)
        harmless = harmless && AliasesHarmlessly(out, in);
    }
    if (fused.outputs.size() == 2)
      harmless = harmless && AliasesHarmlessly(fused.outputs[0], fused.outputs[1]);
    if (!harmless)
      continue;
    const std::optional<TensorRef> rounded = RoundForReaders(&graph, i, fused, backend, outputs);
    if (!rounded.has_value() && !spec.residual)
      continue;  // alone and in F32, as the backend already runs it
    if (rounded.has_value()) {
      spec.out_dtype = DType::kBF16;
      fused.outputs.back() = *rounded;
    }
    fused.kernel = KernelIndex(&graph, spec);
    if (spec.residual)
      fused_away[i - 1] = true;
    graph.nodes[i] = std::move(fused);
  }
  std::vector<StepNode>& nodes = graph.nodes;
  size_t kept = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (fused_away[i])
      continue;
    if (kept != i)
      nodes[kept] = std::move(nodes[i]);
    ++kept;
  }
  nodes.resize(kept);
  return graph;
}

}  // namespace switchyard::compile
