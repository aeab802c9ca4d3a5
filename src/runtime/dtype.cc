#include "runtime/dtype.h"

#include "runtime/ggml_blocks.h"

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
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kQ4_1:
      return "Q4_1";
    case DType::kQ5_0:
      return "Q5_0";
    case DType::kQ5_1:
      return "Q5_1";
    case DType::kQ4_K:
      return "Q4_K";
    case DType::kQ5_K:
      return "Q5_K";
    case DType::kQ6_K:
      return "Q6_K";
    case DType::kQ2_K:
      return "Q2_K";
    case DType::kQ3_K:
      return "Q3_K";
  }
  return "?";
}

int64_t DTypeBlockElems(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return kQuantBlockElems;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
      return kSuperBlockElems;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI32:
      return 1;
  }
  return 1;
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
    case DType::kQ4_0:
      return sizeof(BlockQ4_0);
    case DType::kQ4_1:
      return sizeof(BlockQ4_1);
    case DType::kQ5_0:
      return sizeof(BlockQ5_0);
    case DType::kQ5_1:
      return sizeof(BlockQ5_1);
    case DType::kQ4_K:
      return sizeof(BlockQ4_K);
    case DType::kQ5_K:
      return sizeof(BlockQ5_K);
    case DType::kQ6_K:
      return sizeof(BlockQ6_K);
    case DType::kQ2_K:
      return sizeof(BlockQ2_K);
    case DType::kQ3_K:
      return sizeof(BlockQ3_K);
  }
  return 0;
}

size_t RowBytes(DType dtype, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElems(dtype) * DTypeBlockBytes(dtype));
}

bool IsGgmlQuantDType(DType dtype) {
  switch (dtype) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
      return true;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kI32:
      return false;
  }
  return false;
}

bool IsWeightDType(DType dtype) {
  return dtype != DType::kI32;
}

}  // namespace switchyard::runtime
