#include "model/moe_ffn.h"

#include <algorithm>

#include "base/status_macros.h"

namespace switchyard::model {

using runtime::Tensor;
using RtDType = runtime::DType;

absl::StatusOr<std::unique_ptr<MoeActivations>> AllocateMoeActivations(runtime::Backend* backend,
                                                                       const ModelConfig& c,
                                                                       int64_t max_tokens) {
  auto a = std::make_unique<MoeActivations>();
  auto make = [&](RtDType dtype, std::initializer_list<int64_t> shape) -> absl::StatusOr<Tensor> {
    int64_t elems = 1;
    for (int64_t dim : shape)
      elems *= dim;
    SY_ASSIGN_OR_RETURN(runtime::Buffer buffer, backend->Allocate(runtime::RowBytes(dtype, elems)));
    Tensor t = buffer.View(dtype, shape);
    a->buffers.push_back(std::move(buffer));
    return t;
  };
  const int64_t t = max_tokens;
  const int64_t k = c.num_experts_per_tok;
  const int64_t m = t * k;
  SY_ASSIGN_OR_RETURN(a->logits, make(RtDType::kF32, {t, c.num_experts}));
  SY_ASSIGN_OR_RETURN(a->route_ids, make(RtDType::kI32, {t, k}));
  SY_ASSIGN_OR_RETURN(a->route_weights, make(RtDType::kF32, {t, k}));
  SY_ASSIGN_OR_RETURN(a->rows, make(RtDType::kI32, {m}));
  SY_ASSIGN_OR_RETURN(a->row_weights, make(RtDType::kF32, {m}));
  SY_ASSIGN_OR_RETURN(a->x, make(RtDType::kF32, {m, c.hidden_size}));
  SY_ASSIGN_OR_RETURN(a->gate, make(RtDType::kF32, {m, c.moe_intermediate_size}));
  SY_ASSIGN_OR_RETURN(a->up, make(RtDType::kF32, {m, c.moe_intermediate_size}));
  SY_ASSIGN_OR_RETURN(a->y, make(RtDType::kF32, {m, c.hidden_size}));
  a->host_ids.resize(static_cast<size_t>(m));
  a->host_weights.resize(static_cast<size_t>(m));
  a->host_rows.resize(static_cast<size_t>(m));
  a->host_row_weights.resize(static_cast<size_t>(m));
  a->offsets.resize(static_cast<size_t>(c.num_experts + 1));
  a->cursor.resize(static_cast<size_t>(c.num_experts));
  return a;
}

absl::Status MoeFfn(runtime::Backend* backend, const ModelConfig& c, const LayerWeights& l,
                    int64_t n, const Tensor& h, const Tensor& out, MoeActivations* a) {
  const int64_t k = c.num_experts_per_tok;
  const int64_t m = n * k;
  const Tensor route_ids = a->route_ids.Slice(0, n);
  const Tensor route_weights = a->route_weights.Slice(0, n);
  SY_RETURN_IF_ERROR(backend->MatMul(h, *l.router, nullptr, a->logits.Slice(0, n)));
  SY_RETURN_IF_ERROR(
      backend->MoeRoute(a->logits.Slice(0, n), k, c.norm_topk_prob, route_ids, route_weights));
  SY_RETURN_IF_ERROR(backend->CopyToHost(route_ids, a->host_ids.data()));
  SY_RETURN_IF_ERROR(backend->CopyToHost(route_weights, a->host_weights.data()));

  // Counting sort of the n*k (token, expert) pairs by expert, tokens ascending within each,
  // so the scatter sums each token's experts in increasing expert order, as transformers does.
  std::fill(a->offsets.begin(), a->offsets.end(), 0);
  for (int64_t j = 0; j < m; ++j)
    ++a->offsets[static_cast<size_t>(a->host_ids[static_cast<size_t>(j)]) + 1];
  for (size_t e = 1; e < a->offsets.size(); ++e)
    a->offsets[e] += a->offsets[e - 1];
  std::copy(a->offsets.begin(), a->offsets.end() - 1, a->cursor.begin());
  for (int64_t j = 0; j < m; ++j) {
    const auto e = static_cast<size_t>(a->host_ids[static_cast<size_t>(j)]);
    const auto pos = static_cast<size_t>(a->cursor[e]++);
    a->host_rows[pos] = static_cast<int32_t>(j / k);
    a->host_row_weights[pos] = a->host_weights[static_cast<size_t>(j)];
  }

  const Tensor rows = a->rows.Slice(0, m);
  const Tensor row_weights = a->row_weights.Slice(0, m);
  SY_RETURN_IF_ERROR(backend->CopyToDevice(a->host_rows.data(), rows));
  SY_RETURN_IF_ERROR(backend->CopyToDevice(a->host_row_weights.data(), row_weights));
  const Tensor x = a->x.Slice(0, m);
  const Tensor gate = a->gate.Slice(0, m);
  const Tensor up = a->up.Slice(0, m);
  const Tensor y = a->y.Slice(0, m);
  // An F32 Embedding is a row gather.
  SY_RETURN_IF_ERROR(backend->Embedding(h, rows, x));
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int64_t begin = a->offsets[static_cast<size_t>(e)];
    const int64_t count = a->offsets[static_cast<size_t>(e) + 1] - begin;
    if (count == 0)
      continue;
    const auto i = static_cast<size_t>(e);
    const Tensor expert_gate = gate.Slice(begin, count);
    const Tensor expert_up = up.Slice(begin, count);
    const runtime::Backend::MatMulTerm gate_up[] = {{&l.expert_gate[i], nullptr, &expert_gate},
                                                    {&l.expert_up[i], nullptr, &expert_up}};
    SY_RETURN_IF_ERROR(backend->MatMuls(x.Slice(begin, count), gate_up));
  }
  SY_RETURN_IF_ERROR(backend->SwiGlu(gate, up, gate));
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int64_t begin = a->offsets[static_cast<size_t>(e)];
    const int64_t count = a->offsets[static_cast<size_t>(e) + 1] - begin;
    if (count == 0)
      continue;
    SY_RETURN_IF_ERROR(backend->MatMul(gate.Slice(begin, count),
                                       l.expert_down[static_cast<size_t>(e)], nullptr,
                                       y.Slice(begin, count)));
  }
  return backend->MoeScatterAdd(y, rows, row_weights, out);
}

}  // namespace switchyard::model
