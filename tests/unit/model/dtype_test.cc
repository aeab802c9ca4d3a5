#include "model/dtype.h"

#include <vector>

#include "gtest/gtest.h"

namespace switchyard::model {
namespace {

TEST(DTypeTest, NamesAndGgmlIdsRoundTrip) {
  EXPECT_EQ(DTypeFromSafetensorsName("BF16"), DType::kBF16);
  EXPECT_EQ(DTypeFromSafetensorsName("F8_E4M3"), DType::kF8E4M3);
  EXPECT_EQ(DTypeFromSafetensorsName("Q8_0"), std::nullopt);  // GGML only
  EXPECT_EQ(DTypeFromSafetensorsName("f32"), std::nullopt);
  EXPECT_EQ(DTypeFromGgmlType(8), DType::kQ8_0);
  EXPECT_EQ(DTypeFromGgmlType(30), DType::kBF16);
  EXPECT_EQ(DTypeFromGgmlType(4), std::nullopt);  // removed Q4_2
  EXPECT_EQ(DTypeFromGgmlType(1000), std::nullopt);
  for (uint32_t id = 0; id < 64; ++id) {
    if (auto dtype = DTypeFromGgmlType(id)) {
      EXPECT_EQ(GgmlTypeOf(*dtype), id);
    }
  }
  EXPECT_EQ(GgmlTypeOf(DType::kU32), std::nullopt);
  EXPECT_EQ(DTypeName(DType::kQ4_K), "Q4_K");
}

TEST(DTypeTest, ByteSizes) {
  const std::vector<int64_t> shape = {3, 64};
  EXPECT_EQ(*TensorByteSize(DType::kF32, shape), 3u * 64 * 4);
  EXPECT_EQ(*TensorByteSize(DType::kBF16, shape), 3u * 64 * 2);
  EXPECT_EQ(*TensorByteSize(DType::kQ8_0, shape), 3u * 2 * 34);
  EXPECT_EQ(*TensorByteSize(DType::kQ4_0, shape), 3u * 2 * 18);
  EXPECT_FALSE(TensorByteSize(DType::kQ4_K, shape).ok());  // 64 is not a multiple of 256
  EXPECT_EQ(*TensorByteSize(DType::kF32, std::vector<int64_t>{}), 4u);  // scalar
  EXPECT_FALSE(NumElements(std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}).ok());
  EXPECT_FALSE(
      TensorByteSize(DType::kF64, std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31}).ok());
}

}  // namespace
}  // namespace switchyard::model
