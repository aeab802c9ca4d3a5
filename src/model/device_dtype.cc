#include "model/device_dtype.h"

#include <algorithm>
#include <array>

#include "fmt/format.h"

namespace switchyard::model {
namespace {

struct NamedDType {
  std::string_view name;
  runtime::DType dtype;
};

constexpr std::array<NamedDType, 8> kNames = {{
    {"float32", runtime::DType::kF32},
    {"float", runtime::DType::kF32},
    {"f32", runtime::DType::kF32},
    {"float16", runtime::DType::kF16},
    {"half", runtime::DType::kF16},
    {"f16", runtime::DType::kF16},
    {"bfloat16", runtime::DType::kBF16},
    {"bf16", runtime::DType::kBF16},
}};

// vLLM's --kv-cache-dtype choices that quantize the cache; we have no fp8 kernels.
constexpr std::array<std::string_view, 5> kFp8KvNames = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                                                         "fp8_ds_mla"};

constexpr std::string_view kAccepted =
    "auto, float32 (float, f32), float16 (half, f16) or bfloat16 (bf16)";

}  // namespace

absl::StatusOr<std::optional<runtime::DType>> ParseDeviceDType(std::string_view flag,
                                                               std::string_view value,
                                                               DTypeTarget target) {
  if (value == "auto")
    return std::optional<runtime::DType>();
  for (const NamedDType& n : kNames) {
    if (value == n.name)
      return std::optional<runtime::DType>(n.dtype);
  }
  if (target == DTypeTarget::kKvCache &&
      std::find(kFp8KvNames.begin(), kFp8KvNames.end(), value) != kFp8KvNames.end()) {
    return absl::InvalidArgumentError(
        fmt::format("{} {}: an fp8 KV cache is not supported; use {}", flag, value, kAccepted));
  }
  return absl::InvalidArgumentError(fmt::format("{} must be {}, got '{}'", flag, kAccepted, value));
}

std::optional<runtime::DType> RuntimeDTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return runtime::DType::kF32;
    case DType::kF16:
      return runtime::DType::kF16;
    case DType::kBF16:
      return runtime::DType::kBF16;
    case DType::kQ8_0:
      return runtime::DType::kQ8_0;
    case DType::kQ4_0:
      return runtime::DType::kQ4_0;
    case DType::kQ4_1:
      return runtime::DType::kQ4_1;
    case DType::kQ5_0:
      return runtime::DType::kQ5_0;
    case DType::kQ5_1:
      return runtime::DType::kQ5_1;
    case DType::kQ4_K:
      return runtime::DType::kQ4_K;
    case DType::kQ5_K:
      return runtime::DType::kQ5_K;
    case DType::kQ6_K:
      return runtime::DType::kQ6_K;
    case DType::kQ2_K:
      return runtime::DType::kQ2_K;
    case DType::kQ3_K:
      return runtime::DType::kQ3_K;
    default:
      return std::nullopt;
  }
}

}  // namespace switchyard::model
