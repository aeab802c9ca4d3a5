// Structural-tag compiler: vLLM's `structural_tag` constraint (response_format type
// structural_tag, structured_outputs.structural_tag), in its structures-and-triggers form:
//
//   {"type": "structural_tag",
//    "structures": [{"begin": "<function=get_weather>", "schema": {...}, "end": "</function>"}],
//    "triggers": ["<function="]}
//
// The output is free text until one of the triggers appears in it; from there it must go on
// to spell the rest of the `begin` of a structure whose `begin` starts with that trigger, then
// a JSON text valid for the structure's schema (compiled as CompileJsonSchema does), then its
// `end`, after which free text resumes. Free text may end anywhere; a structure, once its
// trigger has appeared, must be completed. When one trigger is a prefix of another, the shorter
// one fires first (it is the first seen).
//
// Refused with InvalidArgument: invalid JSON, missing or mistyped fields, no structures or no
// triggers, an empty trigger, a `begin` that starts with no trigger, an invalid schema (the
// JSON-schema compiler's message, naming the structure), more than kMaxStructuralTags
// structures or triggers, text past kMaxEbnfTextBytes in total, and xgrammar's newer
// `format` form (not supported). Stateless; any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"

#include "structured/grammar.h"

namespace switchyard::structured {

constexpr size_t kMaxStructuralTags = 256;

absl::StatusOr<std::shared_ptr<const Grammar>> CompileStructuralTag(std::string_view json);

}  // namespace switchyard::structured
