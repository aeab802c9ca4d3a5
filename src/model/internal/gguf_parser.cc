#include "model/internal/gguf_parser.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/byte_reader.h"
#include "base/status_macros.h"

namespace switchyard::model::internal {
namespace {

constexpr uint64_t kMaxKeyBytes = 65535;
// GGML_MAX_NAME: llama.cpp refuses longer tensor names.
constexpr uint64_t kMaxTensorNameBytes = 64;
// Smallest encodings, used to bound counts before anything is allocated.
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

uint64_t MinEncodedBytes(GgufType type) {
  if (type == GgufType::kString) {
    return 8;
  }
  if (type == GgufType::kArray) {
    return 4 + 8;
  }
  return GgufScalarBytes(type);
}

bool ValidType(uint32_t raw) {
  return raw <= static_cast<uint32_t>(GgufType::kFloat64);
}

}  // namespace

// Bytes per element of a fixed-size type; 0 for strings and arrays.
uint64_t GgufScalarBytes(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

// Decodes one fixed-size element at `p` into the numeric fields of `v`.
void DecodeGgufScalar(GgufType type, const uint8_t* p, GgufValue* v) {
  v->type = type;
  auto load = [p](auto sample) {
    decltype(sample) x;
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (type) {
    case GgufType::kUint8:
      v->u = load(uint8_t{});
      break;
    case GgufType::kInt8:
      // An int8 value is a number, not a character.
      v->i = load(int8_t{});  // NOLINT(bugprone-signed-char-misuse)
      break;
    case GgufType::kUint16:
      v->u = load(uint16_t{});
      break;
    case GgufType::kInt16:
      v->i = load(int16_t{});
      break;
    case GgufType::kUint32:
      v->u = load(uint32_t{});
      break;
    case GgufType::kInt32:
      v->i = load(int32_t{});
      break;
    case GgufType::kUint64:
      v->u = load(uint64_t{});
      break;
    case GgufType::kInt64:
      v->i = load(int64_t{});
      break;
    case GgufType::kFloat32:
      v->f = load(float{});
      break;
    case GgufType::kFloat64:
      v->f = load(double{});
      break;
    case GgufType::kBool:
      v->u = load(uint8_t{});
      break;
    case GgufType::kString:
    case GgufType::kArray:
      break;
  }
}

bool IsUnsignedGgufType(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kUint16 || t == GgufType::kUint32 ||
         t == GgufType::kUint64;
}
bool IsSignedGgufType(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 ||
         t == GgufType::kInt64;
}
bool IsFloatGgufType(GgufType t) {
  return t == GgufType::kFloat32 || t == GgufType::kFloat64;
}

namespace {

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, std::string_view source)
      : reader_(bytes), source_(source) {}

  absl::Status Error(std::string_view field, std::string_view what) const {
    return absl::InvalidArgumentError(
        fmt::format("{}: field '{}' (at byte {}): {}", source_, field, reader_.position(), what));
  }
  absl::Status Truncated(std::string_view field) const {
    return Error(field, "file ends inside this field (truncated file)");
  }

  absl::Status ReadString(std::string_view field, uint64_t max_len, std::string_view* out) {
    uint64_t len = 0;
    if (!reader_.Read(&len)) {
      return Truncated(field);
    }
    if (len > max_len) {
      return Error(field, fmt::format("string length {} exceeds {}", len, max_len));
    }
    if (len > reader_.remaining()) {
      return Error(field, fmt::format("string length {} runs past the end of the file", len));
    }
    reader_.ReadBytes(len, out);
    return absl::OkStatus();
  }

  absl::Status ReadValue(std::string_view field, GgufType type, int depth, GgufValue* out) {
    out->type = type;
    if (type == GgufType::kString) {
      return ReadString(field, std::numeric_limits<uint64_t>::max(), &out->s);
    }
    if (type != GgufType::kArray) {
      const uint64_t size = GgufScalarBytes(type);
      if (reader_.remaining() < size) {
        return Truncated(field);
      }
      DecodeGgufScalar(type, reader_.current(), out);
      reader_.Skip(size);
      if (type == GgufType::kBool && out->u > 1) {
        return Error(field, fmt::format("bool value {} is neither 0 nor 1", out->u));
      }
      return absl::OkStatus();
    }
    if (depth >= kMaxGgufArrayDepth) {
      return Error(field, fmt::format("arrays nested deeper than {}", kMaxGgufArrayDepth));
    }
    uint32_t raw_type = 0;
    if (!reader_.Read(&raw_type)) {
      return Truncated(field);
    }
    if (!ValidType(raw_type)) {
      return Error(field, fmt::format("unknown array element type {}", raw_type));
    }
    out->element_type = static_cast<GgufType>(raw_type);
    if (!reader_.Read(&out->count)) {
      return Truncated(field);
    }
    const uint64_t min_bytes = MinEncodedBytes(out->element_type);
    if (out->count > reader_.remaining() / min_bytes) {
      return Error(field, fmt::format("array of {} {} elements runs past the end of the file",
                                      out->count, GgufTypeName(out->element_type)));
    }
    if (out->element_type == GgufType::kString) {
      out->strings.resize(out->count);
      for (std::string_view& s : out->strings) {
        SY_RETURN_IF_ERROR(ReadString(field, std::numeric_limits<uint64_t>::max(), &s));
      }
    } else if (out->element_type == GgufType::kArray) {
      out->arrays.resize(out->count);
      for (GgufValue& element : out->arrays) {
        SY_RETURN_IF_ERROR(ReadValue(field, GgufType::kArray, depth + 1, &element));
      }
    } else {
      out->raw = reader_.current();
      reader_.Skip(out->count * min_bytes);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<GgufContents> Run() {
    GgufContents contents;
    std::string_view magic;
    if (!reader_.ReadBytes(4, &magic)) {
      return Truncated("magic");
    }
    if (magic != "GGUF") {
      return Error("magic", "not a GGUF file (expected \"GGUF\")");
    }
    if (!reader_.Read(&contents.version)) {
      return Truncated("version");
    }
    if (contents.version == 1) {
      return Error("version", "GGUF version 1 is not supported (need 2 or 3)");
    }
    if (contents.version != 2 && contents.version != 3) {
      const uint32_t swapped = __builtin_bswap32(contents.version);
      if (swapped == 2 || swapped == 3) {
        return Error("version", "big-endian GGUF files are not supported");
      }
      return Error("version",
                   fmt::format("unsupported GGUF version {} (need 2 or 3)", contents.version));
    }
    uint64_t tensor_count = 0;
    uint64_t kv_count = 0;
    if (!reader_.Read(&tensor_count)) {
      return Truncated("tensor_count");
    }
    if (!reader_.Read(&kv_count)) {
      return Truncated("metadata_kv_count");
    }
    if (kv_count > reader_.remaining() / kMinMetadataEntryBytes) {
      return Error("metadata_kv_count",
                   fmt::format("{} entries cannot fit in the remaining {} bytes", kv_count,
                               reader_.remaining()));
    }
    if (tensor_count > reader_.remaining() / kMinTensorInfoBytes) {
      return Error("tensor_count", fmt::format("{} tensors cannot fit in the remaining {} bytes",
                                               tensor_count, reader_.remaining()));
    }
    contents.metadata.resize(kv_count);
    std::map<std::string_view, size_t> seen;
    for (uint64_t n = 0; n < kv_count; ++n) {
      GgufMetadataEntry& entry = contents.metadata[n];
      SY_RETURN_IF_ERROR(ReadString("metadata key", kMaxKeyBytes, &entry.key));
      if (!seen.emplace(entry.key, n).second) {
        return Error(entry.key, "metadata key appears twice");
      }
      uint32_t raw_type = 0;
      if (!reader_.Read(&raw_type)) {
        return Truncated(entry.key);
      }
      if (!ValidType(raw_type)) {
        return Error(entry.key, fmt::format("unknown value type {}", raw_type));
      }
      SY_RETURN_IF_ERROR(ReadValue(entry.key, static_cast<GgufType>(raw_type), 0, &entry.value));
    }
    if (const auto it = seen.find("general.alignment"); it != seen.end()) {
      const GgufValue& v = contents.metadata[it->second].value;
      int64_t a = 0;
      if (!v.IsInteger() || !v.ToInt64(&a) || a <= 0 || !std::has_single_bit(uint64_t(a))) {
        return Error("general.alignment", "must be a positive power-of-two integer");
      }
      contents.alignment = static_cast<uint64_t>(a);
    }

    if (tensor_count > reader_.remaining() / kMinTensorInfoBytes) {
      return Error("tensor_count",
                   fmt::format("{} tensor infos cannot fit in the remaining {} bytes", tensor_count,
                               reader_.remaining()));
    }
    contents.tensors.resize(tensor_count);
    std::vector<uint64_t> offsets(tensor_count);
    for (uint64_t n = 0; n < tensor_count; ++n) {
      SY_RETURN_IF_ERROR(ReadTensorInfo(&contents.tensors[n], &offsets[n]));
    }
    const uint64_t end_of_infos = reader_.position();
    const uint64_t file_size = end_of_infos + reader_.remaining();
    if (end_of_infos > std::numeric_limits<uint64_t>::max() - (contents.alignment - 1)) {
      return Error("general.alignment", "data section start overflows");
    }
    contents.data_offset =
        (end_of_infos + contents.alignment - 1) / contents.alignment * contents.alignment;
    if (tensor_count > 0 && contents.data_offset > file_size) {
      return Error("data section",
                   fmt::format("starts at byte {}, past the end of the {}-byte file",
                               contents.data_offset, file_size));
    }
    SY_RETURN_IF_ERROR(CheckTensorData(&contents.tensors, offsets, contents.alignment,
                                       contents.data_offset, file_size));
    return contents;
  }

 private:
  absl::Status TensorError(std::string_view name, std::string_view field,
                           std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("{}: tensor '{}': field '{}' (at byte {}): {}",
                                                  source_, name, field, reader_.position(), what));
  }

  absl::Status ReadTensorInfo(TensorView* tensor, uint64_t* offset) {
    std::string_view name;
    SY_RETURN_IF_ERROR(ReadString("tensor name", kMaxTensorNameBytes, &name));
    tensor->name = std::string(name);
    uint32_t n_dims = 0;
    if (!reader_.Read(&n_dims)) {
      return TensorError(name, "n_dims", "truncated file");
    }
    if (n_dims > kMaxGgufDims) {
      return TensorError(name, "n_dims", fmt::format("{} exceeds {}", n_dims, kMaxGgufDims));
    }
    tensor->shape.resize(n_dims);
    // GGUF lists ne[0] (innermost) first; shapes here are outermost first.
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      if (!reader_.Read(&dim)) {
        return TensorError(name, "dims", "truncated file");
      }
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return TensorError(name, "dims", fmt::format("dimension {} is too large", dim));
      }
      tensor->shape[n_dims - 1 - d] = static_cast<int64_t>(dim);
    }
    uint32_t ggml_type = 0;
    if (!reader_.Read(&ggml_type)) {
      return TensorError(name, "type", "truncated file");
    }
    const std::optional<DType> dtype = DTypeFromGgmlType(ggml_type);
    if (!dtype) {
      return TensorError(name, "type", fmt::format("unknown GGML type {}", ggml_type));
    }
    tensor->dtype = *dtype;
    if (!reader_.Read(offset)) {
      return TensorError(name, "offset", "truncated file");
    }
    absl::StatusOr<int64_t> numel = NumElements(tensor->shape);
    if (!numel.ok()) {
      return TensorError(name, "dims", std::string(numel.status().message()));
    }
    tensor->num_elements = *numel;
    absl::StatusOr<uint64_t> bytes = TensorByteSize(tensor->dtype, tensor->shape);
    if (!bytes.ok()) {
      return TensorError(name, "dims", std::string(bytes.status().message()));
    }
    tensor->byte_size = *bytes;
    return absl::OkStatus();
  }

  absl::Status CheckTensorData(std::vector<TensorView>* tensors,
                               const std::vector<uint64_t>& offsets, uint64_t alignment,
                               uint64_t data_offset, uint64_t file_size) {
    const uint64_t data_size = data_offset <= file_size ? file_size - data_offset : 0;
    std::vector<size_t> order(tensors->size());
    for (size_t n = 0; n < order.size(); ++n) {
      TensorView& t = (*tensors)[n];
      order[n] = n;
      if (offsets[n] % alignment != 0) {
        return TensorError(
            t.name, "offset",
            fmt::format("{} is not a multiple of the alignment {}", offsets[n], alignment));
      }
      if (offsets[n] > data_size || t.byte_size > data_size - offsets[n]) {
        return TensorError(t.name, "offset",
                           fmt::format("{} + {} bytes runs past the {}-byte data section",
                                       offsets[n], t.byte_size, data_size));
      }
      t.file_offset = data_offset + offsets[n];
      t.data = reader_start() + t.file_offset;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
    uint64_t previous_end = 0;
    const TensorView* previous = nullptr;
    for (const size_t n : order) {
      const TensorView& t = (*tensors)[n];
      if (t.byte_size == 0) {
        continue;
      }
      if (previous != nullptr && offsets[n] < previous_end) {
        return TensorError(t.name, "offset",
                           fmt::format("data at {} overlaps tensor '{}' ending at {}", offsets[n],
                                       previous->name, previous_end));
      }
      previous = &t;
      previous_end = offsets[n] + t.byte_size;
    }
    return absl::OkStatus();
  }

  const uint8_t* reader_start() const { return reader_.current() - reader_.position(); }

  base::ByteReader reader_;
  std::string_view source_;
};

}  // namespace

absl::StatusOr<GgufContents> ParseGgufContents(std::span<const uint8_t> bytes,
                                               std::string_view source) {
  return Parser(bytes, source).Run();
}

}  // namespace switchyard::model::internal
