// Files: whole-file reads and read-only memory maps. Errors name the path.
// MappedFile is immutable after Open and safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::base {

// Reads a whole file into memory.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes (truncating) a whole file.
absl::Status WriteFile(const std::string& path, std::string_view contents);

// A read-only private mapping of a whole file; unmapped on destruction.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  const std::string path_;
  const uint8_t* const data_;
  const size_t size_;
};

}  // namespace switchyard::base
