#include "base/json_fields.h"

#include "fmt/format.h"

namespace switchyard::base {

JsonPath JsonPath::Child(std::string_view key) const {
  return JsonPath(source_, path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key));
}

JsonPath JsonPath::Index(size_t i) const {
  return JsonPath(source_, fmt::format("{}[{}]", path_, i));
}

absl::Status JsonPath::Error(std::string_view message) const {
  return absl::InvalidArgumentError(
      fmt::format("{}: {}: {}", source_, path_.empty() ? "(root)" : path_, message));
}

namespace json_internal {

bool Read(simdjson::dom::element value, bool* out) {
  return value.get_bool().get(*out) == simdjson::SUCCESS;
}

bool Read(simdjson::dom::element value, int64_t* out) {
  // Fails for integers past INT64_MAX too (simdjson keeps those as uint64).
  return value.get_int64().get(*out) == simdjson::SUCCESS;
}

bool Read(simdjson::dom::element value, double* out) {
  return value.get_double().get(*out) == simdjson::SUCCESS;
}

bool Read(simdjson::dom::element value, std::string* out) {
  std::string_view view;
  if (!Read(value, &view))
    return false;
  *out = std::string(view);
  return true;
}

bool Read(simdjson::dom::element value, std::string_view* out) {
  return value.get_string().get(*out) == simdjson::SUCCESS;
}

bool Read(simdjson::dom::element value, simdjson::dom::array* out) {
  return value.get_array().get(*out) == simdjson::SUCCESS;
}

bool Read(simdjson::dom::element value, simdjson::dom::object* out) {
  return value.get_object().get(*out) == simdjson::SUCCESS;
}

bool Read(simdjson::dom::element value, simdjson::dom::element* out) {
  *out = value;
  return true;
}

absl::Status TypeError(const JsonPath& at, std::string_view expected) {
  return at.Error(fmt::format("expected {}", expected));
}

absl::Status FieldTypeError(const JsonPath& at, std::string_view key, std::string_view expected) {
  return TypeError(at.Child(key), expected);
}

}  // namespace json_internal

absl::StatusOr<std::optional<simdjson::dom::element>> FindField(simdjson::dom::element object,
                                                                std::string_view key,
                                                                const JsonPath& at) {
  if (!object.is_object())
    return at.Error("expected an object");
  simdjson::dom::element value;
  if (object.at_key(key).get(value) != simdjson::SUCCESS || value.is_null())
    return std::nullopt;
  return value;
}

}  // namespace switchyard::base
