// The compile cache's errors from system calls: "<what> <path>: <the system's message>", as a
// status whose code callers act on (NotFound: no such file; Unavailable: a lock another
// holder has; ResourceExhausted: a full disk). Any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace switchyard::compile::internal {

absl::Status SystemError(std::string_view what, const std::string& path, int error);

}  // namespace switchyard::compile::internal
