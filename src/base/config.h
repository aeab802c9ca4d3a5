// YAML configuration loading (yaml-cpp), with yaml-cpp's exceptions turned into Status.
// Used for router and fleet configs. A loaded node is a value; copies are cheap and
// independent. Not for concurrent mutation.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace switchyard::base {

// Parses YAML text. `source` names the origin in error messages (a path or "<string>").
absl::StatusOr<YAML::Node> ParseYaml(std::string_view text, std::string_view source);

// Reads a scalar field of `node` as T. A missing field yields `fallback`; a field of the
// wrong type is an InvalidArgument naming `field`.
template <typename T>
absl::StatusOr<T> YamlField(const YAML::Node& node, const std::string& field, T fallback);

}  // namespace switchyard::base

#include "base/internal/config_inl.h"
