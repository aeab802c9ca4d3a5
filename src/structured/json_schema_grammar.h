// JSON-schema compiler: turns a JSON schema into a Grammar whose sentences are the compact
// JSON texts valid for the schema, for structured output (response_format json_schema /
// json_object, vLLM's structured_outputs.json / json_object).
//
// Supported subset: type (object, array, string, number, integer, boolean, null, or a list of
// them), properties + required (properties come in schema order; optional ones may be
// left out), additionalProperties (false, true or a schema; when absent, objects that list
// properties allow no others, as xgrammar's default strict mode does, and objects without
// properties allow any), items (a schema or false), minItems, maxItems, minLength, maxLength
// (in characters; an escape counts as one), enum, const, anyOf, oneOf (matched as anyOf:
// exclusivity is not enforced, as in xgrammar), $ref to "#" or a JSON pointer into the
// document ($defs, definitions, ...; recursive references allowed), boolean schemas.
// Annotation keywords (title, description, examples, default, $schema, $comment, deprecated,
// readOnly, writeOnly) are ignored; every other keyword (pattern, format, minimum, ...) is
// refused with InvalidArgument naming it, so no constraint is ever silently dropped.
//
// Output form: no whitespace except at most one space after ':' and ','; strings are valid
// UTF-8 with JSON escapes; additional property keys use no escapes and never repeat a listed
// property's name. Stateless functions; any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "structured/grammar.h"

namespace switchyard::structured {

// InvalidArgument (with the keyword and its location) for invalid JSON, unsupported or
// malformed keywords, unresolvable references and unsatisfiable constraints.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_json);

// Any JSON object (json_object mode).
std::shared_ptr<const Grammar> JsonObjectGrammar();

// JSON text of `s` as a JSON string literal (quotes included, minimal escaping).
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace switchyard::structured
