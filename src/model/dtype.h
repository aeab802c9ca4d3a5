// Element types of tensors stored in safetensors and GGUF files: names, block geometry and
// byte sizes. Quantized GGML types pack `block_elems` elements into `block_bytes` bytes;
// plain types have block_elems == 1. Everything here is a pure function over constant
// tables, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::model {

enum class DType : uint8_t {
  // Plain types (safetensors and GGUF).
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
  // GGML block-quantized types (GGUF only).
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ8_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ8_K,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ3_XXS,
  kIQ1_S,
  kIQ4_NL,
  kIQ3_S,
  kIQ2_S,
  kIQ4_XS,
  kIQ1_M,
  kTQ1_0,
  kTQ2_0,
  kMXFP4,
  kNVFP4,
  kQ1_0,
};

// Canonical name: the safetensors spelling for plain types ("F32", "BF16", "I32"), the
// GGML spelling for quantized ones ("Q8_0", "IQ4_XS").
std::string_view DTypeName(DType dtype);

// Number of elements per block (1 for plain types) and bytes per block.
int64_t DTypeBlockElems(DType dtype);
int64_t DTypeBlockBytes(DType dtype);

// Safetensors "dtype" strings; nullopt for unknown names.
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);

// GGML type ids as written in GGUF tensor infos; nullopt for ids that are unknown or were
// removed from GGML.
std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type);
std::optional<uint32_t> GgmlTypeOf(DType dtype);

// Element count of `shape` (row-major, outermost first); error if a dimension is negative
// or the product overflows int64.
absl::StatusOr<int64_t> NumElements(std::span<const int64_t> shape);

// Bytes taken by a tensor of `dtype` and `shape`. For quantized types the innermost
// (last) dimension must be a multiple of the block size. Errors describe the problem
// without naming a file; callers add the file, tensor and field.
absl::StatusOr<uint64_t> TensorByteSize(DType dtype, std::span<const int64_t> shape);

}  // namespace switchyard::model
