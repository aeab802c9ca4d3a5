// Template definitions for base/config.h.
#pragma once

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::base {

template <typename T>
absl::StatusOr<T> YamlField(const YAML::Node& node, const std::string& field, T fallback) {
  if (!node.IsMap())
    return absl::InvalidArgumentError("config: expected a mapping");
  const YAML::Node value = node[field];
  if (!value.IsDefined() || value.IsNull())
    return fallback;
  try {
    return value.as<T>();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("config: field '{}' has the wrong type: {}", field, e.what()));
  }
}

}  // namespace switchyard::base
