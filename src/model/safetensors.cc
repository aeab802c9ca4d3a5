#include "model/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/byte_reader.h"
#include "base/json.h"
#include "base/status_macros.h"

namespace switchyard::model {
namespace {

absl::Status FileError(std::string_view source, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: field '{}': {}", source, field, what));
}

absl::Status TensorError(std::string_view source, std::string_view tensor, std::string_view field,
                         std::string_view what) {
  return absl::InvalidArgumentError(
      fmt::format("{}: tensor '{}': field '{}': {}", source, tensor, field, what));
}

absl::Status ParseMetadata(simdjson::dom::element value, std::string_view source,
                           std::map<std::string, std::string>* metadata) {
  simdjson::dom::object object;
  if (value.get_object().get(object)) {
    return FileError(source, "__metadata__", "must be an object of strings");
  }
  for (auto [key, entry] : object) {
    std::string_view text;
    if (entry.get_string().get(text)) {
      return FileError(source, "__metadata__",
                       fmt::format("value of '{}' is not a string", std::string(key)));
    }
    (*metadata)[std::string(key)] = std::string(text);
  }
  return absl::OkStatus();
}

// Reads one tensor's dtype, shape and data_offsets; offsets are relative to the data
// section and are checked by the caller once all tensors are known.
absl::Status ParseTensorEntry(std::string_view source, std::string_view name,
                              simdjson::dom::element value, TensorView* tensor, uint64_t* begin,
                              uint64_t* end) {
  simdjson::dom::object object;
  if (value.get_object().get(object)) {
    return TensorError(source, name, "", "must be an object");
  }
  std::string_view dtype_name;
  if (object["dtype"].get_string().get(dtype_name)) {
    return TensorError(source, name, "dtype", "missing or not a string");
  }
  const std::optional<DType> dtype = DTypeFromSafetensorsName(dtype_name);
  if (!dtype) {
    return TensorError(source, name, "dtype",
                       fmt::format("unknown dtype '{}'", std::string(dtype_name)));
  }
  tensor->dtype = *dtype;
  simdjson::dom::array shape;
  if (object["shape"].get_array().get(shape)) {
    return TensorError(source, name, "shape", "missing or not an array");
  }
  for (simdjson::dom::element dim : shape) {
    int64_t d = 0;
    if (dim.get_int64().get(d) || d < 0) {
      return TensorError(source, name, "shape", "dimensions must be non-negative integers");
    }
    tensor->shape.push_back(d);
  }
  simdjson::dom::array offsets;
  if (object["data_offsets"].get_array().get(offsets) || offsets.size() != 2) {
    return TensorError(source, name, "data_offsets", "must be an array of two integers");
  }
  if (offsets.at(0).get_uint64().get(*begin) || offsets.at(1).get_uint64().get(*end)) {
    return TensorError(source, name, "data_offsets", "must be non-negative integers");
  }
  if (*begin > *end) {
    return TensorError(source, name, "data_offsets",
                       fmt::format("begin {} is past end {}", *begin, *end));
  }
  absl::StatusOr<int64_t> numel = NumElements(tensor->shape);
  if (!numel.ok()) {
    return TensorError(source, name, "shape", std::string(numel.status().message()));
  }
  tensor->num_elements = *numel;
  absl::StatusOr<uint64_t> bytes = TensorByteSize(tensor->dtype, tensor->shape);
  if (!bytes.ok()) {
    return TensorError(source, name, "shape", std::string(bytes.status().message()));
  }
  if (*end - *begin != *bytes) {
    return TensorError(source, name, "data_offsets",
                       fmt::format("span of {} bytes does not match shape x dtype = {} bytes",
                                   *end - *begin, *bytes));
  }
  tensor->byte_size = *bytes;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::MappedFile> mapping, base::MappedFile::Open(path));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                      Parse({mapping->data(), mapping->size()}, path));
  file->mapping_ = std::move(mapping);
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(
    std::span<const uint8_t> bytes, std::string_view source) {
  base::ByteReader reader(bytes);
  uint64_t header_len = 0;
  if (!reader.Read(&header_len)) {
    return FileError(
        source, "header_length",
        fmt::format("file is {} bytes, too short for the 8-byte header length", bytes.size()));
  }
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return FileError(
        source, "header_length",
        fmt::format("{} bytes exceeds the limit of {}", header_len, kMaxSafetensorsHeaderBytes));
  }
  std::string_view header;
  if (!reader.ReadBytes(header_len, &header)) {
    return FileError(
        source, "header_length",
        fmt::format("{} bytes runs past the end of the {}-byte file", header_len, bytes.size()));
  }
  const uint64_t data_start = reader.position();
  const uint64_t data_size = reader.remaining();

  absl::StatusOr<std::unique_ptr<base::JsonDocument>> doc =
      base::JsonDocument::Parse(header, fmt::format("{}: field 'header'", source));
  if (!doc.ok()) {
    return doc.status();
  }
  simdjson::dom::object root;
  if ((*doc)->root().get_object().get(root)) {
    return FileError(source, "header", "JSON header is not an object");
  }

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->source_ = std::string(source);
  file->file_size_ = bytes.size();
  struct Span {
    uint64_t begin;
    uint64_t end;
    size_t tensor;
  };
  std::vector<Span> spans;
  std::set<std::string_view> seen;
  for (auto [key, value] : root) {
    if (!seen.insert(key).second) {
      return TensorError(source, key, "name", "appears twice in the header");
    }
    if (key == "__metadata__") {
      SY_RETURN_IF_ERROR(ParseMetadata(value, source, &file->metadata_));
      continue;
    }
    TensorView tensor;
    tensor.name = std::string(key);
    uint64_t begin = 0;
    uint64_t end = 0;
    SY_RETURN_IF_ERROR(ParseTensorEntry(source, key, value, &tensor, &begin, &end));
    if (end > data_size) {
      return TensorError(source, key, "data_offsets",
                         fmt::format("end {} is past the {}-byte data section", end, data_size));
    }
    tensor.file_offset = data_start + begin;
    tensor.data = bytes.data() + tensor.file_offset;
    spans.push_back({begin, end, file->tensors_.size()});
    file->tensors_.push_back(std::move(tensor));
  }

  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Empty tensors occupy no bytes and cannot overlap anything.
  const Span* previous = nullptr;
  for (const Span& span : spans) {
    if (span.begin == span.end) {
      continue;
    }
    if (previous != nullptr && span.begin < previous->end) {
      return TensorError(
          source, file->tensors_[span.tensor].name, "data_offsets",
          fmt::format("[{}, {}) overlaps tensor '{}' at [{}, {})", span.begin, span.end,
                      file->tensors_[previous->tensor].name, previous->begin, previous->end));
    }
    previous = &span;
  }
  std::vector<TensorView> ordered;
  ordered.reserve(spans.size());
  for (const Span& span : spans) {
    ordered.push_back(std::move(file->tensors_[span.tensor]));
  }
  file->tensors_ = std::move(ordered);
  for (size_t i = 0; i < file->tensors_.size(); ++i) {
    file->index_[file->tensors_[i].name] = i;
  }
  return file;
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::Open(
    const std::string& path) {
  std::unique_ptr<SafetensorsCheckpoint> checkpoint(new SafetensorsCheckpoint());
  const std::filesystem::path fs_path(path);
  if (fs_path.extension() != ".json") {
    SY_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    checkpoint->files_.push_back(std::move(file));
  } else {
    checkpoint->sharded_ = true;
    SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                        base::JsonDocument::ParseFile(path));
    simdjson::dom::object weight_map;
    if (doc->root()["weight_map"].get_object().get(weight_map)) {
      return FileError(path, "weight_map", "missing or not an object");
    }
    // Shard file name -> position in files_, and tensor -> shard file name.
    std::map<std::string, size_t, std::less<>> shard_index;
    std::map<std::string, std::string, std::less<>> expected;
    for (auto [tensor, shard_value] : weight_map) {
      std::string_view shard;
      if (shard_value.get_string().get(shard)) {
        return TensorError(path, tensor, "weight_map", "shard name is not a string");
      }
      const std::filesystem::path shard_path(shard);
      // Shards live beside the index; refuse paths that could escape the directory.
      if (shard.empty() || shard_path.is_absolute() || shard_path.filename() != shard_path) {
        return TensorError(path, tensor, "weight_map",
                           fmt::format("shard '{}' is not a plain file name", std::string(shard)));
      }
      if (!expected.emplace(std::string(tensor), std::string(shard)).second) {
        return TensorError(path, tensor, "weight_map", "listed twice");
      }
      if (shard_index.count(shard) > 0) {
        continue;
      }
      const std::string full = (fs_path.parent_path() / shard_path).string();
      absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(full);
      if (!file.ok()) {
        return absl::Status(file.status().code(),
                            fmt::format("{}: field 'weight_map': shard '{}' for tensor '{}': {}",
                                        path, std::string(shard), std::string(tensor),
                                        std::string(file.status().message())));
      }
      shard_index.emplace(std::string(shard), checkpoint->files_.size());
      checkpoint->files_.push_back(*std::move(file));
    }
    for (const auto& [tensor, shard] : expected) {
      const SafetensorsFile& file = *checkpoint->files_[shard_index.find(shard)->second];
      if (file.Find(tensor) == nullptr) {
        return TensorError(path, tensor, "weight_map",
                           fmt::format("not found in shard '{}'", shard));
      }
    }
    for (const auto& [shard, position] : shard_index) {
      for (const TensorView& tensor : checkpoint->files_[position]->tensors()) {
        const auto it = expected.find(tensor.name);
        if (it == expected.end()) {
          return TensorError(path, tensor.name, "weight_map",
                             fmt::format("present in shard '{}' but not listed", shard));
        }
        if (it->second != shard) {
          return TensorError(
              path, tensor.name, "weight_map",
              fmt::format("present in shard '{}' but listed in '{}'", shard, it->second));
        }
      }
    }
  }
  for (const auto& file : checkpoint->files_) {
    for (const TensorView& tensor : file->tensors()) {
      checkpoint->index_[tensor.name] = checkpoint->tensors_.size();
      checkpoint->tensors_.push_back(tensor);
    }
  }
  return checkpoint;
}

const TensorView* SafetensorsCheckpoint::Find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace switchyard::model
