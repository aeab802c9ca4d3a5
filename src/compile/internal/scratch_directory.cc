#include "compile/internal/scratch_directory.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "fmt/format.h"

namespace switchyard::compile::internal {

absl::StatusOr<ScratchDirectory> ScratchDirectory::Create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      fmt::format("{}/sy-kernels-XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  if (::mkdtemp(pattern.data()) == nullptr)
    return absl::InternalError(fmt::format("cannot make a directory like {}", pattern));
  return ScratchDirectory(std::move(pattern));
}

ScratchDirectory::ScratchDirectory(ScratchDirectory&& other) noexcept
    : path_(std::exchange(other.path_, {})) {}

ScratchDirectory::~ScratchDirectory() {
  if (!path_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

std::string ScratchDirectory::File(std::string_view name) const {
  return fmt::format("{}/{}", path_, name);
}

}  // namespace switchyard::compile::internal
