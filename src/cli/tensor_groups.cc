#include "cli/tensor_groups.h"

#include <array>
#include <charconv>
#include <utility>

namespace switchyard::cli {
namespace {

// Groups in output order.
constexpr std::array<std::string_view, 14> kGroups = {
    "token embedding", "attention q", "attention k", "attention v", "attention output",
    "attention bias",  "ffn gate",    "ffn up",      "ffn down",    "ffn router",
    "norms",           "output",      "rope",        "other"};

struct Rule {
  std::string_view gguf;  // after "blk.N." for layer tensors
  std::string_view hf;    // after "model.layers.N." for layer tensors
  std::string_view group;
};

constexpr Rule kRules[] = {
    {"token_embd.weight", "model.embed_tokens.weight", "token embedding"},
    {"attn_q.weight", "self_attn.q_proj.weight", "attention q"},
    {"attn_k.weight", "self_attn.k_proj.weight", "attention k"},
    {"attn_v.weight", "self_attn.v_proj.weight", "attention v"},
    {"attn_output.weight", "self_attn.o_proj.weight", "attention output"},
    {"attn_q.bias", "self_attn.q_proj.bias", "attention bias"},
    {"attn_k.bias", "self_attn.k_proj.bias", "attention bias"},
    {"attn_v.bias", "self_attn.v_proj.bias", "attention bias"},
    {"attn_output.bias", "self_attn.o_proj.bias", "attention bias"},
    {"ffn_gate.weight", "mlp.gate_proj.weight", "ffn gate"},
    {"ffn_up.weight", "mlp.up_proj.weight", "ffn up"},
    {"ffn_down.weight", "mlp.down_proj.weight", "ffn down"},
    // Mixture-of-experts layers: llama.cpp stacks the experts in one tensor per matrix.
    {"ffn_gate_exps.weight", "", "ffn gate"},
    {"ffn_up_exps.weight", "", "ffn up"},
    {"ffn_down_exps.weight", "", "ffn down"},
    {"ffn_gate_inp.weight", "mlp.gate.weight", "ffn router"},
    {"output.weight", "lm_head.weight", "output"},
    {"rope_freqs.weight", "", "rope"},
};

// Strips "blk.N." or "model.layers.N." and sets *layer to N.
std::string_view StripLayer(std::string_view name, int64_t* layer) {
  for (std::string_view prefix : {std::string_view("blk."), std::string_view("model.layers.")}) {
    if (name.substr(0, prefix.size()) != prefix)
      continue;
    std::string_view rest = name.substr(prefix.size());
    int64_t n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec != std::errc() || end == rest.data() + rest.size() || *end != '.')
      return name;
    *layer = n;
    return rest.substr(static_cast<size_t>(end - rest.data()) + 1);
  }
  return name;
}

size_t GroupIndex(std::string_view group) {
  for (size_t i = 0; i < kGroups.size(); ++i) {
    if (kGroups[i] == group)
      return i;
  }
  return kGroups.size() - 1;
}

}  // namespace

TensorGroupOf ClassifyTensor(std::string_view name) {
  TensorGroupOf out;
  const std::string_view local = StripLayer(name, &out.layer);
  for (const Rule& rule : kRules) {
    if (local == rule.gguf || (!rule.hf.empty() && local == rule.hf)) {
      out.group = rule.group;
      return out;
    }
  }
  // HF experts: model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight.
  if (local.find(".experts.") != std::string_view::npos) {
    for (const auto& [suffix, group] :
         {std::pair<std::string_view, std::string_view>{"gate_proj.weight", "ffn gate"},
          {"up_proj.weight", "ffn up"},
          {"down_proj.weight", "ffn down"}}) {
      if (local.ends_with(suffix)) {
        out.group = group;
        return out;
      }
    }
  }
  // attn_norm, ffn_norm, output_norm, attn_q_norm, input_layernorm, model.norm, ...
  out.group = local.find("norm") != std::string_view::npos ? "norms" : "other";
  return out;
}

std::vector<TensorGroup> GroupTensors(const std::vector<model::TensorView>& tensors) {
  std::array<TensorGroup, kGroups.size()> groups;
  for (const model::TensorView& t : tensors) {
    TensorGroup& g = groups[GroupIndex(ClassifyTensor(t.name).group)];
    ++g.tensors;
    g.parameters += t.num_elements;
    g.bytes += t.byte_size;
    DTypeStats& d = g.dtypes[std::string(model::DTypeName(t.dtype))];
    ++d.tensors;
    d.bytes += t.byte_size;
  }
  std::vector<TensorGroup> out;
  for (size_t i = 0; i < kGroups.size(); ++i) {
    if (groups[i].tensors > 0) {
      groups[i].group = kGroups[i];
      out.push_back(std::move(groups[i]));
    }
  }
  return out;
}

}  // namespace switchyard::cli
