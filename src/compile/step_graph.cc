#include "compile/step_graph.h"

#include <array>

#include "fmt/format.h"
#include <openssl/sha.h>

namespace switchyard::compile {
namespace {

std::string_view RopeStyleName(runtime::RopeStyle style) {
  return style == runtime::RopeStyle::kNeox ? "neox" : "interleaved";
}

std::string_view RopeScalingName(runtime::RopeScalingType type) {
  switch (type) {
    case runtime::RopeScalingType::kNone:
      return "none";
    case runtime::RopeScalingType::kLinear:
      return "linear";
    case runtime::RopeScalingType::kLlama3:
      return "llama3";
  }
  return "unknown";
}

// "%3+128:f32[16,576]"; a KV pool's block count prints as "*".
void AppendRef(const StepGraph& g, const TensorRef& ref, std::string* out) {
  if (!ref.present()) {
    out->append("-");
    return;
  }
  const bool pool = g.values[static_cast<size_t>(ref.value)].kind == ValueKind::kKvPool;
  fmt::format_to(std::back_inserter(*out), "%{}+{}:{}[", ref.value, ref.offset,
                 runtime::DTypeName(ref.dtype));
  for (size_t i = 0; i < ref.shape.size(); ++i) {
    if (i > 0)
      out->push_back(',');
    if (i == 0 && pool)
      out->push_back('*');
    else
      fmt::format_to(std::back_inserter(*out), "{}", ref.shape[i]);
  }
  out->push_back(']');
}

}  // namespace

std::string_view ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput:
      return "input";
    case ValueKind::kWeight:
      return "weight";
    case ValueKind::kKvPool:
      return "kv_pool";
    case ValueKind::kActivation:
      return "activation";
  }
  return "unknown";
}

std::string_view StepOpName(StepOp op) {
  switch (op) {
    case StepOp::kEmbedding:
      return "embedding";
    case StepOp::kRmsNorm:
      return "rms_norm";
    case StepOp::kRope:
      return "rope";
    case StepOp::kMatMul:
      return "matmul";
    case StepOp::kSwiGlu:
      return "swiglu";
    case StepOp::kGeluTanhGlu:
      return "gelu_tanh_glu";
    case StepOp::kScale:
      return "scale";
    case StepOp::kSoftCap:
      return "soft_cap";
    case StepOp::kAdd:
      return "add";
    case StepOp::kWriteKv:
      return "write_kv";
    case StepOp::kPagedAttention:
      return "paged_attention";
    case StepOp::kRowKernel:
      return "row_kernel";
  }
  return "unknown";
}

std::string_view MatMulPathName(runtime::MatMulPath path) {
  switch (path) {
    case runtime::MatMulPath::kAuto:
      return "auto";
    case runtime::MatMulPath::kStreaming:
      return "streaming";
    case runtime::MatMulPath::kPanel:
      return "panel";
  }
  return "unknown";
}

int32_t StepGraph::Find(std::string_view name) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].name == name)
      return static_cast<int32_t>(i);
  }
  return -1;
}

std::string StepGraph::Canonical() const {
  std::string out;
  auto it = std::back_inserter(out);
  for (size_t i = 0; i < values.size(); ++i) {
    const GraphValue& v = values[i];
    // A pool's size is the engine's (its block count), not the graph's.
    const size_t bytes = v.kind == ValueKind::kKvPool ? 0 : v.size_bytes;
    fmt::format_to(it, "value %{} {} {} {}\n", i, ValueKindName(v.kind), v.name, bytes);
  }
  for (size_t i = 0; i < ropes.size(); ++i) {
    const runtime::RopeParams& r = ropes[i];
    // {:a}: hexadecimal floating point, exact.
    fmt::format_to(it, "rope #{} head_dim={} rotary_dim={} theta={:a} style={} scaling={} ", i,
                   r.head_dim, r.rotary_dim, r.theta, RopeStyleName(r.style),
                   RopeScalingName(r.scaling));
    fmt::format_to(it, "factor={:a} low={:a} high={:a} original={} freq_factors=[", r.factor,
                   r.low_freq_factor, r.high_freq_factor, r.original_max_position_embeddings);
    for (size_t f = 0; f < r.freq_factors.size(); ++f)
      fmt::format_to(it, "{}{:a}", f == 0 ? "" : ",", r.freq_factors[f]);
    out.append("]\n");
  }
  for (size_t i = 0; i < kernels.size(); ++i)
    fmt::format_to(it, "kernel #{} {}\n", i, RowKernelCanonical(kernels[i]));
  for (const StepNode& n : nodes) {
    out.append(StepOpName(n.op));
    out.append(" (");
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i > 0)
        out.append(", ");
      AppendRef(*this, n.inputs[i], &out);
    }
    out.append(") -> (");
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i > 0)
        out.append(", ");
      AppendRef(*this, n.outputs[i], &out);
    }
    fmt::format_to(it, ") scalar={:a} window={} rope={}", n.scalar, n.window, n.rope);
    if (n.path != runtime::MatMulPath::kAuto)
      fmt::format_to(it, " path={}", MatMulPathName(n.path));
    if (n.kernel >= 0)
      fmt::format_to(it, " kernel={}", n.kernel);
    out.push_back('\n');
  }
  return out;
}

std::string StepGraph::Digest() const {
  const std::string text = Canonical();
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  std::string hex;
  hex.reserve(2 * digest.size());
  for (unsigned char byte : digest)
    fmt::format_to(std::back_inserter(hex), "{:02x}", byte);
  return hex;
}

}  // namespace switchyard::compile
