#include "compile/internal/system_error.h"

#include <errno.h>

#include <system_error>

#include "fmt/format.h"

namespace switchyard::compile::internal {

absl::Status SystemError(std::string_view what, const std::string& path, int error) {
  // generic_category's message is strerror's text without strerror's shared buffer.
  const std::string message =
      fmt::format("{} {}: {}", what, path, std::generic_category().message(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EWOULDBLOCK:
      return absl::UnavailableError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace switchyard::compile::internal
