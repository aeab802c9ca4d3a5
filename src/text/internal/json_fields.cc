#include "text/internal/json_fields.h"

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::text::internal {

JsonPath JsonPath::Child(std::string_view key) const {
  return JsonPath{source, path.empty() ? std::string(key) : fmt::format("{}.{}", path, key)};
}

JsonPath JsonPath::Index(size_t i) const {
  return JsonPath{source, fmt::format("{}[{}]", path, i)};
}

absl::Status JsonPath::Error(std::string_view message) const {
  return absl::InvalidArgumentError(
      fmt::format("{}: {}: {}", source, path.empty() ? "(root)" : path, message));
}

absl::StatusOr<std::optional<simdjson::dom::element>> OptionalField(simdjson::dom::element obj,
                                                                    std::string_view key,
                                                                    const JsonPath& at) {
  if (!obj.is_object())
    return at.Error("expected an object");
  simdjson::dom::element value;
  if (obj.at_key(key).get(value) != simdjson::SUCCESS || value.is_null()) {
    return std::nullopt;
  }
  return value;
}

absl::StatusOr<simdjson::dom::element> RequiredField(simdjson::dom::element obj,
                                                     std::string_view key, const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> value, OptionalField(obj, key, at));
  if (!value)
    return at.Child(key).Error("missing required field");
  return *value;
}

absl::StatusOr<std::string> RequiredString(simdjson::dom::element obj, std::string_view key,
                                           const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::element value, RequiredField(obj, key, at));
  std::string_view s;
  if (value.get_string().get(s) != simdjson::SUCCESS) {
    return at.Child(key).Error("expected a string");
  }
  return std::string(s);
}

absl::StatusOr<std::optional<std::string>> OptionalString(simdjson::dom::element obj,
                                                          std::string_view key,
                                                          const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> value, OptionalField(obj, key, at));
  if (!value)
    return std::nullopt;
  std::string_view s;
  if (value->get_string().get(s) != simdjson::SUCCESS) {
    return at.Child(key).Error("expected a string");
  }
  return std::string(s);
}

absl::StatusOr<bool> BoolOr(simdjson::dom::element obj, std::string_view key, bool fallback,
                            const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> value, OptionalField(obj, key, at));
  if (!value)
    return fallback;
  bool b = false;
  if (value->get_bool().get(b) != simdjson::SUCCESS) {
    return at.Child(key).Error("expected a boolean");
  }
  return b;
}

absl::StatusOr<int64_t> IntOr(simdjson::dom::element obj, std::string_view key, int64_t fallback,
                              const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> value, OptionalField(obj, key, at));
  if (!value)
    return fallback;
  int64_t i = 0;
  if (value->get_int64().get(i) != simdjson::SUCCESS) {
    uint64_t u = 0;
    if (value->get_uint64().get(u) != simdjson::SUCCESS || u > INT64_MAX) {
      return at.Child(key).Error("expected an integer");
    }
    i = static_cast<int64_t>(u);
  }
  return i;
}

absl::StatusOr<simdjson::dom::array> RequiredArray(simdjson::dom::element obj, std::string_view key,
                                                   const JsonPath& at) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::element value, RequiredField(obj, key, at));
  simdjson::dom::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS) {
    return at.Child(key).Error("expected an array");
  }
  return array;
}

absl::StatusOr<std::string> TypeOf(simdjson::dom::element obj, const JsonPath& at) {
  return RequiredString(obj, "type", at);
}

}  // namespace switchyard::text::internal
