#include "structured/request_grammar.h"

#include <optional>
#include <string>
#include <utility>

#include "fmt/format.h"

#include "api/error.h"

namespace switchyard::structured {

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarForRequest(const api::SamplingRequest& s,
                                                                 GrammarCache* cache) {
  std::optional<StructuredOutputSpec> spec;
  std::string param;
  const bool formatted = s.response_format.has_value() && s.response_format->type != "text";
  if (formatted) {
    const api::ResponseFormat& f = *s.response_format;
    if (f.type == "json_object") {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kJsonObject, "", {}};
      param = "response_format";
    } else if (f.type == "json_schema") {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kJsonSchema, f.schema, {}};
      param = "response_format.json_schema.schema";
    } else if (f.type == "structural_tag") {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kStructuralTag, f.raw, {}};
      param = "response_format";
    } else {
      return absl::UnimplementedError(
          fmt::format("response_format type '{}' is not supported yet.", f.type));
    }
  }
  if (s.structured_outputs.has_value()) {
    if (formatted) {
      return api::InvalidParam("structured_outputs",
                               "You can only use one kind of structured outputs constraint but "
                               "response_format and structured_outputs are both given.");
    }
    const api::StructuredOutputs& so = *s.structured_outputs;
    if (so.json.has_value()) {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kJsonSchema, *so.json, {}};
      param = "structured_outputs.json";
    } else if (so.json_object) {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kJsonObject, "", {}};
      param = "structured_outputs.json_object";
    } else if (so.choice.has_value()) {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kChoice, "", *so.choice};
      param = "structured_outputs.choice";
    } else if (so.regex.has_value()) {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kRegex, *so.regex, {}};
      param = "structured_outputs.regex";
    } else if (so.grammar.has_value()) {
      spec = StructuredOutputSpec{StructuredOutputSpec::Kind::kGrammar, *so.grammar, {}};
      param = "structured_outputs.grammar";
    } else {
      spec = StructuredOutputSpec{
          StructuredOutputSpec::Kind::kStructuralTag, so.structural_tag.value_or(""), {}};
      param = "structured_outputs.structural_tag";
    }
  }
  if (!spec.has_value())
    return std::shared_ptr<const Grammar>();
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar =
      cache != nullptr ? cache->Get(*spec) : CompileStructuredOutput(*spec);
  if (!grammar.ok())
    return api::InvalidParam(param, std::string(grammar.status().message()));
  return grammar;
}

}  // namespace switchyard::structured
