#include "runtime/dtype.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

#include "runtime/float16.h"
#include "runtime/tensor.h"

namespace switchyard::runtime {
namespace {

TEST(DTypeTest, RowBytes) {
  EXPECT_EQ(RowBytes(DType::kF32, 3), 12u);
  EXPECT_EQ(RowBytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(RowBytes(DType::kF16, 5), 10u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(DType::kI32, 2), 8u);
  EXPECT_EQ(DTypeName(DType::kQ8_0), "Q8_0");
}

TEST(Float16Test, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
      continue;
    }
    EXPECT_EQ(F32ToF16(f), h) << h;
  }
}

TEST(Float16Test, F16Rounding) {
  EXPECT_EQ(F16ToF32(F32ToF16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(F16ToF32(F32ToF16(65520.0f))));
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + 1.0f / 2048)), 1.0f);  // Ties to even.
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(F16ToF32(F32ToF16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(F32ToF16(std::ldexp(1.0f, -26))), 0.0f);
}

TEST(Float16Test, Bf16) {
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.5f)), 1.5f);
  EXPECT_EQ(F32ToBf16(1.0f + 1.0f / 256), F32ToBf16(1.0f));  // Ties to even.
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Float16Test, Q8_0MatchesGgmlLayout) {
  float x[32];
  for (int i = 0; i < 32; ++i)
    x[i] = static_cast<float>(i - 16) / 4.0f;
  BlockQ8_0 block;
  QuantizeRowQ8_0(x, 32, &block);
  EXPECT_NEAR(F16ToF32(block.scale_f16), 4.0f / 127.0f, 1e-5);
  EXPECT_EQ(block.qs[0], -127);
  EXPECT_EQ(block.qs[16], 0);
  float back[32];
  DequantizeRow(DType::kQ8_0, &block, 32, back);
  for (int i = 0; i < 32; ++i)
    EXPECT_NEAR(back[i], x[i], 4.0f / 127.0f);
}

TEST(TensorTest, ShapesAndSlices) {
  float data[24] = {};
  Tensor t(DType::kF32, {2, 3, 4}, data);
  EXPECT_EQ(t.rows(), 6);
  EXPECT_EQ(t.cols(), 4);
  EXPECT_EQ(t.size_bytes(), 96u);
  EXPECT_EQ(t.DebugString(), "F32[2, 3, 4]");
  EXPECT_EQ(t.Slice(1, 1).data(), data + 12);
  EXPECT_EQ(t.Reshaped({6, 4}).dim(0), 6);
  EXPECT_EQ(t.dim(-1), 4);
}

}  // namespace
}  // namespace switchyard::runtime
