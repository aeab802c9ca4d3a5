// Typed reads of values and object fields from a parsed JSON document (base/json.h), for the
// files and flags that configure a model or a server: config.json, tokenizer.json,
// generation_config.json, --kv-events-config. Every error is InvalidArgument naming the
// document, the path of the value and what was expected:
//   "tokenizer.json: model.merges[3]: expected a string"
// A field that is absent or JSON null counts as absent, as transformers and vLLM read them.
// Pure functions over a borrowed DOM (the document must outlive what they return);
// thread-safe. Request bodies on the hot path have their own reader (api/internal).
#pragma once

#include <cstddef>
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

namespace switchyard::base {

// Where a value sits: the document's name (a file, a flag) and the path from its root, e.g.
// ("tokenizer.json", "model.merges[3]"). Borrows `source`.
class JsonPath {
 public:
  explicit JsonPath(std::string_view source, std::string path = "")
      : source_(source), path_(std::move(path)) {}

  JsonPath Child(std::string_view key) const;
  JsonPath Index(size_t i) const;
  // InvalidArgument "<source>: <path>: <message>", with "(root)" for the root.
  absl::Status Error(std::string_view message) const;

  std::string_view source() const { return source_; }
  const std::string& path() const { return path_; }

 private:
  std::string_view source_;
  std::string path_;
};

// The types a value can be read as, with what an error says was expected:
//   bool                 "a boolean"
//   int64_t              "an integer" (a whole number within int64; 2.0 is not one)
//   double               "a number" (integers too)
//   std::string          "a string" (std::string_view: the same, borrowed from the DOM)
//   simdjson::dom::array "an array";  simdjson::dom::object "an object"
//   simdjson::dom::element: any value, never an error.
namespace json_internal {
bool Read(simdjson::dom::element value, bool* out);
bool Read(simdjson::dom::element value, int64_t* out);
bool Read(simdjson::dom::element value, double* out);
bool Read(simdjson::dom::element value, std::string* out);
bool Read(simdjson::dom::element value, std::string_view* out);
bool Read(simdjson::dom::element value, simdjson::dom::array* out);
bool Read(simdjson::dom::element value, simdjson::dom::object* out);
bool Read(simdjson::dom::element value, simdjson::dom::element* out);

template <typename T>
constexpr std::string_view kExpected = "a value";
template <>
inline constexpr std::string_view kExpected<bool> = "a boolean";
template <>
inline constexpr std::string_view kExpected<int64_t> = "an integer";
template <>
inline constexpr std::string_view kExpected<double> = "a number";
template <>
inline constexpr std::string_view kExpected<std::string> = "a string";
template <>
inline constexpr std::string_view kExpected<std::string_view> = "a string";
template <>
inline constexpr std::string_view kExpected<simdjson::dom::array> = "an array";
template <>
inline constexpr std::string_view kExpected<simdjson::dom::object> = "an object";

// "<at>: expected <what>" and "<at>.<key>: expected <what>"; the path of a field is built
// only on this error path.
absl::Status TypeError(const JsonPath& at, std::string_view expected);
absl::Status FieldTypeError(const JsonPath& at, std::string_view key, std::string_view expected);
}  // namespace json_internal

// `value` as a T; else "<at>: expected <T>".
template <typename T>
absl::StatusOr<T> JsonAs(simdjson::dom::element value, const JsonPath& at) {
  T out{};
  if (!json_internal::Read(value, &out))
    return json_internal::TypeError(at, json_internal::kExpected<T>);
  return out;
}

// `object[key]`, nullopt when absent or null; at.Error("expected an object") when `object` is
// not one. `at` is where `object` sits.
absl::StatusOr<std::optional<simdjson::dom::element>> FindField(simdjson::dom::element object,
                                                                std::string_view key,
                                                                const JsonPath& at);

// `value`, the field `key` of the object at `at`, as a T; else "<at>.<key>: expected <T>".
// For walking an object's fields: the field's path is built only for the error.
template <typename T>
absl::StatusOr<T> FieldAs(simdjson::dom::element value, std::string_view key, const JsonPath& at) {
  T out{};
  if (!json_internal::Read(value, &out))
    return json_internal::FieldTypeError(at, key, json_internal::kExpected<T>);
  return out;
}

// `object[key]` as a T, nullopt when absent or null.
template <typename T = simdjson::dom::element>
absl::StatusOr<std::optional<T>> OptionalField(simdjson::dom::element object, std::string_view key,
                                               const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> value, FindField(object, key, at));
  if (!value)
    return std::nullopt;
  SY_ASSIGN_OR_RETURN(T typed, FieldAs<T>(*value, key, at));
  return typed;
}

// `object[key]` as a T; "<at>.<key>: missing required field" when absent or null.
template <typename T = simdjson::dom::element>
absl::StatusOr<T> RequiredField(simdjson::dom::element object, std::string_view key,
                                const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<T> value, OptionalField<T>(object, key, at));
  if (!value)
    return at.Child(key).Error("missing required field");
  return *std::move(value);
}

// `object[key]` as a T, `fallback` when absent or null.
template <typename T>
absl::StatusOr<T> FieldOr(simdjson::dom::element object, std::string_view key, T fallback,
                          const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<T> value, OptionalField<T>(object, key, at));
  return value ? *std::move(value) : std::move(fallback);
}

// Parses every element of the required array `object[key]` in order with
// `parse(element, path, is_last)`, which returns StatusOr<T>; the first error stops it.
template <typename T, typename Parse>
absl::StatusOr<std::vector<T>> ParseEach(simdjson::dom::element object, std::string_view key,
                                         const JsonPath& at, Parse parse) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::array list,
                      RequiredField<simdjson::dom::array>(object, key, at));
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

}  // namespace switchyard::base
