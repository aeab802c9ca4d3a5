// ScratchDirectory: a directory of our own under $TMPDIR (or /tmp), removed with
// everything in it when destroyed. Move-only; one thread at a time.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace switchyard::compile::internal {

class ScratchDirectory {
 public:
  static absl::StatusOr<ScratchDirectory> Create();
  ScratchDirectory(ScratchDirectory&& other) noexcept;
  ScratchDirectory& operator=(ScratchDirectory&&) = delete;
  ~ScratchDirectory();

  // The path of `name` inside it.
  std::string File(std::string_view name) const;

 private:
  explicit ScratchDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace switchyard::compile::internal
