#include "model/device_dtype.h"

#include <string>

#include "gtest/gtest.h"

namespace switchyard::model {
namespace {

using runtime::DType;

TEST(DeviceDTypeTest, VllmNamesAndShortAliases) {
  for (DTypeTarget target : {DTypeTarget::kWeights, DTypeTarget::kKvCache}) {
    EXPECT_EQ(*ParseDeviceDType("--dtype", "auto", target), std::nullopt);
    for (const char* name : {"float32", "float", "f32"})
      EXPECT_EQ(*ParseDeviceDType("--dtype", name, target), DType::kF32) << name;
    for (const char* name : {"float16", "half", "f16"})
      EXPECT_EQ(*ParseDeviceDType("--dtype", name, target), DType::kF16) << name;
    for (const char* name : {"bfloat16", "bf16"})
      EXPECT_EQ(*ParseDeviceDType("--dtype", name, target), DType::kBF16) << name;
  }
}

TEST(DeviceDTypeTest, ErrorsNameTheFlagAndTheAcceptedValues) {
  auto bad = ParseDeviceDType("--dtype", "fp32", DTypeTarget::kWeights);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(bad.status().message());
  EXPECT_NE(message.find("--dtype"), std::string::npos) << message;
  EXPECT_NE(message.find("'fp32'"), std::string::npos) << message;
  for (const char* name : {"auto", "float32", "float16", "bfloat16", "half", "bf16"})
    EXPECT_NE(message.find(name), std::string::npos) << name << " in " << message;
  EXPECT_FALSE(ParseDeviceDType("--dtype", "Float32", DTypeTarget::kWeights).ok());
  EXPECT_FALSE(ParseDeviceDType("--dtype", "", DTypeTarget::kWeights).ok());
}

TEST(DeviceDTypeTest, Fp8KvCacheNamesAreKnownButRefused) {
  for (const char* name : {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}) {
    auto kv = ParseDeviceDType("--kv-cache-dtype", name, DTypeTarget::kKvCache);
    ASSERT_EQ(kv.status().code(), absl::StatusCode::kInvalidArgument) << name;
    const std::string message(kv.status().message());
    EXPECT_NE(message.find("fp8 KV cache is not supported"), std::string::npos) << message;
    EXPECT_NE(message.find("--kv-cache-dtype"), std::string::npos) << message;
    EXPECT_NE(message.find("bfloat16"), std::string::npos) << message;
  }
  auto weights = ParseDeviceDType("--dtype", "fp8", DTypeTarget::kWeights);
  ASSERT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(weights.status().message()).find("KV cache"), std::string::npos);
}

}  // namespace
}  // namespace switchyard::model
