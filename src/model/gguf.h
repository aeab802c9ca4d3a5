// Reader for GGUF files (versions 2 and 3, little-endian): metadata key/values, tensor
// infos and tensor data, memory mapped. A GgufFile is immutable after Open/Parse and may
// be read from any thread; string values and tensor views point into the mapping and live
// as long as the GgufFile.
//
// Every count, length and offset read from the file is checked against the bytes that
// remain before anything is allocated or dereferenced; errors name the file and the field
// (metadata key or tensor name).
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

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufTypeName(GgufType type);

// Deepest nesting of arrays accepted; real files use one level.
inline constexpr int kMaxGgufArrayDepth = 8;
// GGML_MAX_DIMS.
inline constexpr uint32_t kMaxGgufDims = 4;
inline constexpr uint64_t kDefaultGgufAlignment = 32;

// One metadata value. Scalars are widened into one of the numeric fields; strings point
// into the file. Arrays of numbers keep their raw little-endian bytes (no copy), arrays of
// strings keep views, arrays of arrays keep nested values.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  uint64_t u = 0;      // unsigned integer types and bool
  int64_t i = 0;       // signed integer types
  double f = 0;        // float types
  std::string_view s;  // kString

  // kArray only.
  GgufType element_type = GgufType::kUint8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;           // numeric and bool elements
  std::vector<std::string_view> strings;  // string elements
  std::vector<GgufValue> arrays;          // array elements

  bool IsInteger() const;
  // Integer value as int64 (unsigned values above INT64_MAX fail). REQUIRES: IsInteger().
  bool ToInt64(int64_t* out) const;
  // Numeric (integer or float) value as double.
  bool ToDouble(double* out) const;
};

struct GgufMetadataEntry {
  std::string_view key;
  GgufValue value;
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a whole file image held by the caller, who keeps `bytes` alive as long as the
  // result; `source` names the bytes in error messages.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::span<const uint8_t> bytes,
                                                         std::string_view source);

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_size_; }
  // In file order.
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }

  // Null if absent.
  const GgufValue* Find(std::string_view key) const;
  const TensorView* FindTensor(std::string_view name) const;

  // Typed getters; NotFound if the key is absent, InvalidArgument if its type does not
  // fit. Messages name the file and the key.
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;  // any non-negative integer
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;    // any integer in int64
  absl::StatusOr<double> GetFloat(std::string_view key) const;   // any number
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  // The value if it is an array (of anything).
  absl::StatusOr<const GgufValue*> GetArray(std::string_view key) const;
  absl::StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  // Arrays of any numeric type converted element by element.
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

 private:
  GgufFile() = default;
  absl::Status KeyError(std::string_view key, std::string_view what) const;

  std::unique_ptr<base::MappedFile> mapping_;  // null when parsed from a caller's buffer
  std::string source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultGgufAlignment;
  uint64_t data_offset_ = 0;
  uint64_t file_size_ = 0;
  std::vector<GgufMetadataEntry> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string_view, size_t> metadata_index_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace switchyard::model
