#include "model/gguf.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "model/internal/gguf_parser.h"

namespace switchyard::model {

using internal::DecodeGgufScalar;
using internal::GgufScalarBytes;
using internal::IsFloatGgufType;
using internal::IsSignedGgufType;
using internal::IsUnsignedGgufType;

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool GgufValue::IsInteger() const {
  return IsUnsignedGgufType(type) || IsSignedGgufType(type);
}

bool GgufValue::ToInt64(int64_t* out) const {
  if (IsSignedGgufType(type)) {
    *out = i;
    return true;
  }
  if (IsUnsignedGgufType(type) && u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(u);
    return true;
  }
  return false;
}

bool GgufValue::ToDouble(double* out) const {
  if (IsUnsignedGgufType(type)) {
    *out = static_cast<double>(u);
  } else if (IsSignedGgufType(type)) {
    *out = static_cast<double>(i);
  } else if (IsFloatGgufType(type)) {
    *out = f;
  } else {
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::MappedFile> mapping, base::MappedFile::Open(path));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file,
                      Parse({mapping->data(), mapping->size()}, path));
  file->mapping_ = std::move(mapping);
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::span<const uint8_t> bytes,
                                                          std::string_view source) {
  SY_ASSIGN_OR_RETURN(internal::GgufContents contents, internal::ParseGgufContents(bytes, source));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->source_ = std::string(source);
  file->file_size_ = bytes.size();
  file->version_ = contents.version;
  file->alignment_ = contents.alignment;
  file->data_offset_ = contents.data_offset;
  file->metadata_ = std::move(contents.metadata);
  file->tensors_ = std::move(contents.tensors);
  for (size_t n = 0; n < file->metadata_.size(); ++n) {
    file->metadata_index_.emplace(file->metadata_[n].key, n);
  }
  for (size_t n = 0; n < file->tensors_.size(); ++n) {
    if (!file->tensor_index_.emplace(file->tensors_[n].name, n).second) {
      return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': field 'name': appears twice",
                                                    source, file->tensors_[n].name));
    }
  }
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const TensorView* GgufFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status GgufFile::KeyError(std::string_view key, std::string_view what) const {
  return absl::InvalidArgumentError(fmt::format("{}: field '{}': {}", source_, key, what));
}

#define SY_GGUF_FIND_OR_RETURN(value, key)                                            \
  const GgufValue* value = Find(key);                                                 \
  if ((value) == nullptr) {                                                           \
    return absl::NotFoundError(fmt::format("{}: field '{}': missing", source_, key)); \
  }

absl::StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  SY_GGUF_FIND_OR_RETURN(v, key);
  if (v->type != GgufType::kString) {
    return KeyError(key, fmt::format("expected a string, found {}", GgufTypeName(v->type)));
  }
  return v->s;
}

absl::StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  SY_GGUF_FIND_OR_RETURN(v, key);
  if (IsUnsignedGgufType(v->type)) {
    return v->u;
  }
  if (IsSignedGgufType(v->type) && v->i >= 0) {
    return static_cast<uint64_t>(v->i);
  }
  return KeyError(key,
                  fmt::format("expected a non-negative integer, found {}", GgufTypeName(v->type)));
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  SY_GGUF_FIND_OR_RETURN(v, key);
  int64_t out = 0;
  if (!v->ToInt64(&out)) {
    return KeyError(key, fmt::format("expected an int64 integer, found {}", GgufTypeName(v->type)));
  }
  return out;
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  SY_GGUF_FIND_OR_RETURN(v, key);
  double out = 0;
  if (!v->ToDouble(&out)) {
    return KeyError(key, fmt::format("expected a number, found {}", GgufTypeName(v->type)));
  }
  return out;
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  SY_GGUF_FIND_OR_RETURN(v, key);
  if (v->type != GgufType::kBool) {
    return KeyError(key, fmt::format("expected a bool, found {}", GgufTypeName(v->type)));
  }
  return v->u != 0;
}

absl::StatusOr<const GgufValue*> GgufFile::GetArray(std::string_view key) const {
  SY_GGUF_FIND_OR_RETURN(v, key);
  if (v->type != GgufType::kArray) {
    return KeyError(key, fmt::format("expected an array, found {}", GgufTypeName(v->type)));
  }
  return v;
}

absl::StatusOr<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  SY_ASSIGN_OR_RETURN(const GgufValue* v, GetArray(key));
  if (v->element_type != GgufType::kString) {
    return KeyError(key, fmt::format("expected an array of strings, found an array of {}",
                                     GgufTypeName(v->element_type)));
  }
  return v->strings;
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  SY_ASSIGN_OR_RETURN(const GgufValue* v, GetArray(key));
  const uint64_t size = GgufScalarBytes(v->element_type);
  if (size == 0 || v->element_type == GgufType::kBool) {
    return KeyError(key, fmt::format("expected an array of numbers, found an array of {}",
                                     GgufTypeName(v->element_type)));
  }
  std::vector<double> out(v->count);
  GgufValue element;
  for (uint64_t n = 0; n < v->count; ++n) {
    DecodeGgufScalar(v->element_type, v->raw + n * size, &element);
    element.ToDouble(&out[n]);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  SY_ASSIGN_OR_RETURN(const GgufValue* v, GetArray(key));
  if (!IsUnsignedGgufType(v->element_type) && !IsSignedGgufType(v->element_type)) {
    return KeyError(key, fmt::format("expected an array of integers, found an array of {}",
                                     GgufTypeName(v->element_type)));
  }
  const uint64_t size = GgufScalarBytes(v->element_type);
  std::vector<int64_t> out(v->count);
  GgufValue element;
  for (uint64_t n = 0; n < v->count; ++n) {
    DecodeGgufScalar(v->element_type, v->raw + n * size, &element);
    if (!element.ToInt64(&out[n])) {
      return KeyError(key, fmt::format("element {} does not fit in int64", n));
    }
  }
  return out;
}

#undef SY_GGUF_FIND_OR_RETURN

}  // namespace switchyard::model
