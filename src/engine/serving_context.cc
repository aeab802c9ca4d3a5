#include "engine/serving_context.h"

#include "api/error.h"
#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::engine {

absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& path) {
  GenerationDefaults d;
  if (path.empty())
    return d;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc, base::JsonDocument::ParseFile(path));
  const simdjson::dom::element root = doc->root();
  const base::JsonPath at(path);
  SY_ASSIGN_OR_RETURN(d.temperature, base::OptionalField<double>(root, "temperature", at));
  SY_ASSIGN_OR_RETURN(d.top_p, base::OptionalField<double>(root, "top_p", at));
  SY_ASSIGN_OR_RETURN(d.min_p, base::OptionalField<double>(root, "min_p", at));
  SY_ASSIGN_OR_RETURN(d.repetition_penalty,
                      base::OptionalField<double>(root, "repetition_penalty", at));
  // A number, as transformers writes it (an int, or a float such as 50.0).
  SY_ASSIGN_OR_RETURN(std::optional<double> top_k, base::OptionalField<double>(root, "top_k", at));
  if (top_k.has_value())
    d.top_k = static_cast<int32_t>(*top_k);
  return d;
}

absl::Status CheckServedModel(const ServingContext& ctx, const std::string& model) {
  if (!model.empty() && model != ctx.served_model_name)
    return api::ModelNotFound(model);
  return absl::OkStatus();
}

}  // namespace switchyard::engine
