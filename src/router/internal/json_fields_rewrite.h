// RewriteTopLevelFields: a JSON object's text with some top-level fields dropped and others
// appended, every kept field passed through as its raw JSON text (read with simdjson, never
// re-serialized), so an engine sees the client's request as it was sent. Pure; any thread.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::router::internal {

// `body`'s top-level fields, without those named in `drop`, then `appended` (",k":v pairs
// with a leading comma each). Sets *found_last_drop (when not null) when the last name of
// `drop` was there. InvalidArgument "the request body is not a JSON object".
absl::StatusOr<std::string> RewriteTopLevelFields(std::string_view body,
                                                  std::initializer_list<std::string_view> drop,
                                                  std::string_view appended,
                                                  bool* found_last_drop = nullptr);

// The body with "cache_salt" set to `salt` (a client's own is replaced).
absl::StatusOr<std::string> WithCacheSalt(std::string_view body, std::string_view salt);

}  // namespace switchyard::router::internal
