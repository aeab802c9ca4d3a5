#include "base/config.h"

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::base {

absl::StatusOr<YAML::Node> ParseYaml(std::string_view text, std::string_view source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: invalid YAML: {}", source, e.what()));
  }
}

}  // namespace switchyard::base
