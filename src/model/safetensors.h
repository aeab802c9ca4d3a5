// Readers for safetensors checkpoints: one file (SafetensorsFile) and a sharded set
// described by model.safetensors.index.json (SafetensorsCheckpoint). Files are memory
// mapped; tensor views point into the mappings. Objects are immutable after Open/Parse
// and may be read from any thread; views live as long as the object that made them.
//
// Validation is strict on everything that could make a reader touch bytes it should not:
// header length against the file size, data_offsets against the data section, byte counts
// against shape x dtype, and overlaps between tensors. Gaps between tensors are allowed
// (the format does not forbid them and some writers pad). Every error names the file, the
// tensor when there is one, and the field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "base/file.h"
#include "model/tensor_view.h"

namespace switchyard::model {

// Largest JSON header accepted; HF's own reader uses the same bound.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // Parses a whole file image held by the caller, who keeps `bytes` alive as long as the
  // result; `source` names the bytes in error messages.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Parse(std::span<const uint8_t> bytes,
                                                                std::string_view source);

  const std::string& source() const { return source_; }
  uint64_t file_size() const { return file_size_; }
  // In file order of the data section (sorted by offset).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Null if absent.
  const TensorView* Find(std::string_view name) const;

 private:
  SafetensorsFile() = default;

  std::unique_ptr<base::MappedFile> mapping_;  // null when parsed from a caller's buffer
  std::string source_;
  uint64_t file_size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A checkpoint stored as one model.safetensors or as shards listed by an index JSON
// ({"weight_map": {tensor: shard file}}). Each shard is opened once; each tensor of the
// map must be in the shard the map names, and each tensor in a shard must be in the map.
class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file or a *.safetensors.index.json file.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> Open(const std::string& path);

  bool sharded() const { return sharded_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // All tensors of all shards, shard by shard in index order.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* Find(std::string_view name) const;

 private:
  SafetensorsCheckpoint() = default;

  bool sharded_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace switchyard::model
