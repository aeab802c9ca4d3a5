// ISA features an artefact may need, named as runtime/cpu names its kernel levels
// ("portable", "avx2", "avx512"), and whether this CPU has them. A compile cache entry lists
// the features its code uses; an entry needing one this CPU lacks (or one this build cannot
// name) is never loaded. Any thread.
#pragma once

#include <functional>
#include <string_view>

namespace switchyard::compile {

// Whether a feature is present; tests replace the CPU's answer.
using IsaFeaturePredicate = std::function<bool(std::string_view feature)>;

// This CPU's answer; false for names it does not know.
bool CpuHasIsaFeature(std::string_view feature);

}  // namespace switchyard::compile
