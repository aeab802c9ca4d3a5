#include "engine/serving_context.h"

#include "api/error.h"
#include "base/json.h"
#include "base/status_macros.h"

namespace switchyard::engine {

absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& path) {
  GenerationDefaults d;
  if (path.empty())
    return d;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc, base::JsonDocument::ParseFile(path));
  simdjson::dom::object root;
  if (doc->root().get_object().get(root) != simdjson::SUCCESS)
    return absl::InvalidArgumentError(path + ": not a JSON object");
  auto number = [&root](const char* key) -> std::optional<double> {
    double v = 0;
    if (root[key].get_double().get(v) == simdjson::SUCCESS)
      return v;
    int64_t i = 0;
    if (root[key].get_int64().get(i) == simdjson::SUCCESS)
      return static_cast<double>(i);
    return std::nullopt;
  };
  d.temperature = number("temperature");
  d.top_p = number("top_p");
  d.min_p = number("min_p");
  d.repetition_penalty = number("repetition_penalty");
  if (std::optional<double> k = number("top_k"); k.has_value())
    d.top_k = static_cast<int32_t>(*k);
  return d;
}

absl::Status CheckServedModel(const ServingContext& ctx, const std::string& model) {
  if (!model.empty() && model != ctx.served_model_name)
    return api::ModelNotFound(model);
  return absl::OkStatus();
}

}  // namespace switchyard::engine
