// The grammar an OpenAI request's structured-output fields ask for: response_format
// (json_object, json_schema, structural_tag) or vLLM's structured_outputs (json, json_object,
// choice, regex, grammar, structural_tag).
// Stateless; any thread (the HTTP front calls it while validating a request).
#pragma once

#include <memory>

#include "absl/status/statusor.h"

#include "api/sampling_request.h"
#include "structured/grammar.h"
#include "structured/grammar_cache.h"

namespace switchyard::structured {

// Null when the request is unconstrained. Errors: InvalidParam naming the field for an
// invalid or unsupported schema, regex, grammar or structural tag, an empty choice list or two
// constraints at once. Compiles through `cache` when given.
absl::StatusOr<std::shared_ptr<const Grammar>> GrammarForRequest(const api::SamplingRequest& s,
                                                                 GrammarCache* cache);

}  // namespace switchyard::structured
