#include "text/internal/metaspace_options.h"

#include <optional>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::text::internal {

absl::StatusOr<MetaspaceOptions> ParseMetaspaceOptions(simdjson::dom::element json,
                                                       const base::JsonPath& at) {
  MetaspaceOptions options;
  SY_ASSIGN_OR_RETURN(std::optional<std::string> replacement,
                      base::OptionalField<std::string>(json, "replacement", at));
  options.replacement = replacement.value_or("\xE2\x96\x81");
  if (options.replacement.empty())
    return at.Child("replacement").Error("must not be empty");
  SY_ASSIGN_OR_RETURN(std::optional<std::string> scheme_name,
                      base::OptionalField<std::string>(json, "prepend_scheme", at));
  if (scheme_name) {
    if (*scheme_name == "first") {
      options.scheme = PrependScheme::kFirst;
    } else if (*scheme_name == "never") {
      options.scheme = PrependScheme::kNever;
    } else if (*scheme_name != "always") {
      return at.Child("prepend_scheme").Error(fmt::format("unknown scheme \"{}\"", *scheme_name));
    }
  } else {
    SY_ASSIGN_OR_RETURN(bool add_prefix_space,
                        base::FieldOr<bool>(json, "add_prefix_space", true, at));
    if (!add_prefix_space)
      options.scheme = PrependScheme::kNever;
  }
  return options;
}

}  // namespace switchyard::text::internal
