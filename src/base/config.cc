#include "base/config.h"

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/file.h"
#include "base/status_macros.h"

namespace switchyard::base {

absl::StatusOr<YAML::Node> ParseYaml(std::string_view text, std::string_view source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: invalid YAML: {}", source, e.what()));
  }
}

absl::StatusOr<YAML::Node> LoadYamlFile(const std::string& path) {
  SY_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseYaml(text, path);
}

}  // namespace switchyard::base
