// The name=value pairs of a URL query ("a=1&b=x%20y", the part of a target after '?'), as
// HTML forms and Starlette (vLLM's server) read them: pairs split on '&', name and value on
// the first '=' (a pair without one has an empty value), '+' is a space, %XX is a byte;
// empty pairs are skipped. Stateless; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::net {

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// InvalidArgument on a '%' not followed by two hex digits. Decoded bytes are not checked
// for UTF-8.
absl::StatusOr<QueryParams> ParseQueryString(std::string_view query);

// A boolean query value as FastAPI reads one: true/1/yes/on or false/0/no/off, in any case.
// Nullopt otherwise.
std::optional<bool> ParseQueryBool(std::string_view value);

}  // namespace switchyard::net
