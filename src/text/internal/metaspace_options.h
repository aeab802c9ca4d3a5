// The configuration shared by the Metaspace pre-tokenizer and the Metaspace decoder in
// tokenizer.json: the space replacement and when it is prepended. Pure parsing; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/json_fields.h"

namespace switchyard::text::internal {

enum class PrependScheme { kAlways, kFirst, kNever };

struct MetaspaceOptions {
  std::string replacement;  // never empty; "▁" by default
  PrependScheme scheme = PrependScheme::kAlways;
};

// Reads "replacement" and "prepend_scheme" (or, in older files, "add_prefix_space": false
// means never). An empty replacement or an unknown scheme is an error naming the field.
absl::StatusOr<MetaspaceOptions> ParseMetaspaceOptions(simdjson::dom::element json,
                                                       const base::JsonPath& at);

}  // namespace switchyard::text::internal
