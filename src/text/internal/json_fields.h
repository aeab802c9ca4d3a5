// Typed field access on simdjson DOM objects for the tokenizer.json loader. Every error
// names the file (`source`) and the JSON path of the field. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/status_macros.h"

namespace switchyard::text::internal {

// Where a JSON value came from: file name and path, e.g. ("tokenizer.json", "model.merges").
struct JsonPath {
  std::string_view source;
  std::string path;

  JsonPath Child(std::string_view key) const;
  JsonPath Index(size_t i) const;
  absl::Status Error(std::string_view message) const;
};

// Missing or null fields yield nullopt (or the default); a present field of the wrong type
// is an error.
absl::StatusOr<std::optional<simdjson::dom::element>> OptionalField(simdjson::dom::element obj,
                                                                    std::string_view key,
                                                                    const JsonPath& at);
absl::StatusOr<simdjson::dom::element> RequiredField(simdjson::dom::element obj,
                                                     std::string_view key, const JsonPath& at);
absl::StatusOr<std::string> RequiredString(simdjson::dom::element obj, std::string_view key,
                                           const JsonPath& at);
absl::StatusOr<std::optional<std::string>> OptionalString(simdjson::dom::element obj,
                                                          std::string_view key, const JsonPath& at);
absl::StatusOr<bool> BoolOr(simdjson::dom::element obj, std::string_view key, bool fallback,
                            const JsonPath& at);
absl::StatusOr<int64_t> IntOr(simdjson::dom::element obj, std::string_view key, int64_t fallback,
                              const JsonPath& at);
absl::StatusOr<simdjson::dom::array> RequiredArray(simdjson::dom::element obj, std::string_view key,
                                                   const JsonPath& at);
// The "type" field of a component.
absl::StatusOr<std::string> TypeOf(simdjson::dom::element obj, const JsonPath& at);

// Parses every element of the required array `obj[key]` in order with
// `parse(element, path, is_last)`, which returns StatusOr<T>; the first error stops it.
// The Sequence forms of normalizers, pre-tokenizers and decoders all read their lists so.
template <typename T, typename Parse>
absl::StatusOr<std::vector<T>> ParseEach(simdjson::dom::element obj, std::string_view key,
                                         const JsonPath& at, Parse parse) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::array list, RequiredArray(obj, key, at));
  const JsonPath list_at = at.Child(key);
  const size_t count = list.size();
  std::vector<T> out;
  out.reserve(count);
  size_t i = 0;
  for (simdjson::dom::element item : list) {
    SY_ASSIGN_OR_RETURN(T value, parse(item, list_at.Index(i), i + 1 == count));
    out.push_back(std::move(value));
    ++i;
  }
  return out;
}

}  // namespace switchyard::text::internal
