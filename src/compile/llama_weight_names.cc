#include "compile/llama_weight_names.h"

#include <optional>
#include <string_view>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::compile {

absl::Status ForEachLlamaWeight(
    const model::LlamaWeights& w,
    const std::function<absl::Status(const std::string& name, const runtime::Tensor& tensor)>&
        visit) {
  SY_RETURN_IF_ERROR(visit("embed", w.embed));
  SY_RETURN_IF_ERROR(visit("final_norm", w.final_norm));
  SY_RETURN_IF_ERROR(visit("lm_head", w.lm_head));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const model::LayerWeights& l = w.layers[i];
    const auto name = [i](std::string_view field) { return fmt::format("layers.{}.{}", i, field); };
    for (const auto& [field, tensor] : {std::pair{"attn_norm", &l.attn_norm},
                                        {"wq", &l.wq},
                                        {"wk", &l.wk},
                                        {"wv", &l.wv},
                                        {"wo", &l.wo},
                                        {"ffn_norm", &l.ffn_norm},
                                        {"w_gate", &l.w_gate},
                                        {"w_up", &l.w_up},
                                        {"w_down", &l.w_down}}) {
      SY_RETURN_IF_ERROR(visit(name(field), *tensor));
    }
    for (const auto& [field, tensor] : {std::pair{"bq", &l.bq},
                                        {"bk", &l.bk},
                                        {"bv", &l.bv},
                                        {"q_norm", &l.q_norm},
                                        {"k_norm", &l.k_norm},
                                        {"post_attn_norm", &l.post_attn_norm},
                                        {"post_ffn_norm", &l.post_ffn_norm}}) {
      if (tensor->has_value())
        SY_RETURN_IF_ERROR(visit(name(field), **tensor));
    }
  }
  return absl::OkStatus();
}

}  // namespace switchyard::compile
