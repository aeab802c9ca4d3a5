#include "compile/isa_features.h"

#include <optional>

#include "runtime/cpu/cpu_backend.h"

namespace switchyard::compile {

bool CpuHasIsaFeature(std::string_view feature) {
  const std::optional<runtime::CpuIsa> isa = runtime::ParseCpuIsa(feature);
  return isa.has_value() && runtime::CpuSupportsIsa(*isa);
}

}  // namespace switchyard::compile
