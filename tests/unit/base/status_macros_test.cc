#include "base/status_macros.h"

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0)
    return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  SY_ASSIGN_OR_RETURN(const int half, Half(x));
  SY_ASSIGN_OR_RETURN(const int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  SY_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagatesErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).message(), "odd");
}

}  // namespace
}  // namespace switchyard::base
