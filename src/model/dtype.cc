#include "model/dtype.h"

#include <array>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::model {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t block_elems;
  int64_t block_bytes;
  int ggml_type;  // -1: not a GGML type.
};

// Block geometry of the GGML types follows ggml's type traits (also gguf-py's
// GGML_QUANT_SIZES); tests cross-check the table against gguf-py.
constexpr std::array<DTypeInfo, 41> kInfos = {{
    {DType::kF64, "F64", 1, 8, 28},
    {DType::kF32, "F32", 1, 4, 0},
    {DType::kF16, "F16", 1, 2, 1},
    {DType::kBF16, "BF16", 1, 2, 30},
    {DType::kF8E4M3, "F8_E4M3", 1, 1, -1},
    {DType::kF8E5M2, "F8_E5M2", 1, 1, -1},
    {DType::kI64, "I64", 1, 8, 27},
    {DType::kI32, "I32", 1, 4, 26},
    {DType::kI16, "I16", 1, 2, 25},
    {DType::kI8, "I8", 1, 1, 24},
    {DType::kU64, "U64", 1, 8, -1},
    {DType::kU32, "U32", 1, 4, -1},
    {DType::kU16, "U16", 1, 2, -1},
    {DType::kU8, "U8", 1, 1, -1},
    {DType::kBool, "BOOL", 1, 1, -1},
    {DType::kQ4_0, "Q4_0", 32, 18, 2},
    {DType::kQ4_1, "Q4_1", 32, 20, 3},
    {DType::kQ5_0, "Q5_0", 32, 22, 6},
    {DType::kQ5_1, "Q5_1", 32, 24, 7},
    {DType::kQ8_0, "Q8_0", 32, 34, 8},
    {DType::kQ8_1, "Q8_1", 32, 40, 9},
    {DType::kQ2_K, "Q2_K", 256, 84, 10},
    {DType::kQ3_K, "Q3_K", 256, 110, 11},
    {DType::kQ4_K, "Q4_K", 256, 144, 12},
    {DType::kQ5_K, "Q5_K", 256, 176, 13},
    {DType::kQ6_K, "Q6_K", 256, 210, 14},
    {DType::kQ8_K, "Q8_K", 256, 292, 15},
    {DType::kIQ2_XXS, "IQ2_XXS", 256, 66, 16},
    {DType::kIQ2_XS, "IQ2_XS", 256, 74, 17},
    {DType::kIQ3_XXS, "IQ3_XXS", 256, 98, 18},
    {DType::kIQ1_S, "IQ1_S", 256, 50, 19},
    {DType::kIQ4_NL, "IQ4_NL", 32, 18, 20},
    {DType::kIQ3_S, "IQ3_S", 256, 110, 21},
    {DType::kIQ2_S, "IQ2_S", 256, 82, 22},
    {DType::kIQ4_XS, "IQ4_XS", 256, 136, 23},
    {DType::kIQ1_M, "IQ1_M", 256, 56, 29},
    {DType::kTQ1_0, "TQ1_0", 256, 54, 34},
    {DType::kTQ2_0, "TQ2_0", 256, 66, 35},
    {DType::kMXFP4, "MXFP4", 32, 17, 39},
    {DType::kNVFP4, "NVFP4", 64, 36, 40},
    {DType::kQ1_0, "Q1_0", 128, 18, 41},
}};

const DTypeInfo& Info(DType dtype) {
  return kInfos[static_cast<size_t>(dtype)];
}

// The table is indexed by enum value; keep the two in the same order.
constexpr bool TableMatchesEnum() {
  for (size_t i = 0; i < kInfos.size(); ++i) {
    if (static_cast<size_t>(kInfos[i].dtype) != i) {
      return false;
    }
  }
  return true;
}
static_assert(TableMatchesEnum());

}  // namespace

std::string_view DTypeName(DType dtype) {
  return Info(dtype).name;
}
int64_t DTypeBlockElems(DType dtype) {
  return Info(dtype).block_elems;
}
int64_t DTypeBlockBytes(DType dtype) {
  return Info(dtype).block_bytes;
}

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const DTypeInfo& info : kInfos) {
    if (info.block_elems == 1 && info.name == name) {
      return info.dtype;
    }
  }
  return std::nullopt;
}

std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  for (const DTypeInfo& info : kInfos) {
    if (info.ggml_type >= 0 && static_cast<uint32_t>(info.ggml_type) == ggml_type) {
      return info.dtype;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> GgmlTypeOf(DType dtype) {
  const int id = Info(dtype).ggml_type;
  if (id < 0) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(id);
}

absl::StatusOr<int64_t> NumElements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(fmt::format("negative dimension {}", dim));
    }
    if (dim != 0 && n > std::numeric_limits<int64_t>::max() / dim) {
      return absl::InvalidArgumentError("element count overflows 64 bits");
    }
    n *= dim;
  }
  return n;
}

absl::StatusOr<uint64_t> TensorByteSize(DType dtype, std::span<const int64_t> shape) {
  absl::StatusOr<int64_t> numel = NumElements(shape);
  if (!numel.ok()) {
    return numel.status();
  }
  const DTypeInfo& info = Info(dtype);
  if (info.block_elems > 1) {
    const int64_t inner = shape.empty() ? 1 : shape.back();
    if (inner % info.block_elems != 0) {
      return absl::InvalidArgumentError(
          fmt::format("innermost dimension {} is not a multiple of the {} block size {}", inner,
                      info.name, info.block_elems));
    }
  }
  const uint64_t blocks = static_cast<uint64_t>(*numel / info.block_elems);
  const uint64_t block_bytes = static_cast<uint64_t>(info.block_bytes);
  if (blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
    return absl::InvalidArgumentError("byte size overflows 64 bits");
  }
  return blocks * block_bytes;
}

}  // namespace switchyard::model
