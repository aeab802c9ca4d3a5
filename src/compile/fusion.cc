#include "compile/fusion.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

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

// The nodes after `at` that read its output h, when all of them are MatMuls that take it
// in BF16 (until a node writes over h); empty otherwise.
std::vector<size_t> Bf16Readers(const StepGraph& graph, size_t at, const runtime::Backend& backend,
                                std::span<const std::string_view> outputs) {
  const TensorRef& h = graph.nodes[at].outputs[0];
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
  std::vector<StepNode>& nodes = graph.nodes;
  std::vector<bool> fused_away(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != StepOp::kRmsNorm || !NormFusable(nodes[i]))
      continue;
    const StepNode& norm = nodes[i];
    RowKernelSpec spec;
    spec.cols = norm.inputs[0].shape.back();
    spec.eps = norm.scalar;
    StepNode fused;
    fused.op = StepOp::kRowKernel;
    const bool residual = i > 0 && nodes[i - 1].op == StepOp::kAdd && !fused_away[i - 1] &&
                          AddFusable(nodes[i - 1], norm);
    if (residual) {
      const StepNode& add = nodes[i - 1];
      fused.inputs = {add.inputs[0], add.inputs[1], norm.inputs[1]};
      fused.outputs = {add.outputs[0], norm.outputs[0]};
    } else {
      fused.inputs = norm.inputs;
      fused.outputs = norm.outputs;
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
    const TensorRef& h = fused.outputs.back();
    std::vector<size_t> readers = Bf16Readers(graph, i, backend, outputs);
    // Rounded rows are half as long: they must not land on rows still to be read.
    const bool h_apart = std::none_of(fused.inputs.begin(), fused.inputs.end(),
                                      [&](const TensorRef& in) { return Overlap(in, h); }) &&
                         (!residual || !Overlap(fused.outputs[0], h));
    if (!h_apart)
      readers.clear();
    if (!residual && readers.empty())
      continue;  // a norm alone, as the backend already runs it
    if (!readers.empty()) {
      spec.out_dtype = DType::kBF16;
      TensorRef rounded = h;
      rounded.dtype = DType::kBF16;
      fused.outputs.back() = rounded;
      for (size_t j : readers)
        nodes[j].inputs[0] = rounded;
    }
    spec.residual = residual;
    fused.kernel = KernelIndex(&graph, spec);
    if (residual)
      fused_away[i - 1] = true;
    nodes[i] = std::move(fused);
  }
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
