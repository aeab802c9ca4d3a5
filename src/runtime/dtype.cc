#include "runtime/dtype.h"

namespace switchyard::runtime {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kQ8_0:
      return "Q8_0";
    case DType::kI32:
      return "I32";
  }
  return "?";
}

int64_t DTypeBlockElems(DType dtype) {
  return dtype == DType::kQ8_0 ? kQ8_0BlockElems : 1;
}

int64_t DTypeBlockBytes(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return kQ8_0BlockBytes;
  }
  return 0;
}

size_t RowBytes(DType dtype, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElems(dtype) * DTypeBlockBytes(dtype));
}

bool IsWeightDType(DType dtype) {
  return dtype != DType::kI32;
}

}  // namespace switchyard::runtime
