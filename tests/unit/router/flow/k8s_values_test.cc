// Kubernetes quantities and Go durations, as llm-d's flowControl fields take them.
#include "router/flow/internal/k8s_values.h"

#include <optional>
#include <string_view>

#include "gtest/gtest.h"

namespace switchyard::router::flow::internal {
namespace {

TEST(K8sValuesTest, Quantities) {
  const struct {
    std::string_view text;
    std::optional<int64_t> value;
  } cases[] = {
      {"0", 0},
      {"1000", 1000},
      {"+7", 7},
      {"-3", -3},
      {"1k", 1000},
      {"500M", 500'000'000},
      {"1G", 1'000'000'000},
      {"2T", 2'000'000'000'000},
      {"1E", 1'000'000'000'000'000'000},
      {"1Ki", 1024},
      {"1Mi", 1 << 20},
      {"1Gi", int64_t{1} << 30},
      {"7Ei", 7 * (int64_t{1} << 60)},
      {"8Ei", std::nullopt},  // beyond int64
      {"1e3", 1000},
      {"1E3", 1000},
      {"25e-1", 3},  // 2.5, rounded up as Quantity.Value()
      {"1.5G", 1'500'000'000},
      {"1.5", 2},
      {".5Ki", 512},
      {"0.1", 1},
      {"9223372036854775807", 9'223'372'036'854'775'807},
      {"9223372036854775808", std::nullopt},
      {"", std::nullopt},
      {"G", std::nullopt},
      {"1g", std::nullopt},
      {"1KiB", std::nullopt},
      {"500m", std::nullopt},  // sub-unit suffixes are not taken
      {"1.2.3", std::nullopt},
      {"1e", std::nullopt},
      {"1e123", std::nullopt},
      {"abc", std::nullopt},
      {"1 k", std::nullopt},
  };
  for (const auto& c : cases)
    EXPECT_EQ(ParseQuantity(c.text), c.value) << c.text;
}

TEST(K8sValuesTest, Durations) {
  using std::chrono::nanoseconds;
  const struct {
    std::string_view text;
    std::optional<nanoseconds> value;
  } cases[] = {
      {"0", nanoseconds(0)},
      {"0s", nanoseconds(0)},
      {"60s", std::chrono::seconds(60)},
      {"500ms", std::chrono::milliseconds(500)},
      {"2m", std::chrono::minutes(2)},
      {"1h30m", std::chrono::minutes(90)},
      {"1.5s", std::chrono::milliseconds(1500)},
      {".5s", std::chrono::milliseconds(500)},
      {"10us", std::chrono::microseconds(10)},
      {"10\u00b5s", std::chrono::microseconds(10)},
      {"7ns", nanoseconds(7)},
      {"1m0.25s", std::chrono::milliseconds(60'250)},
      {"-5s", std::chrono::seconds(-5)},
      {"+5s", std::chrono::seconds(5)},
      {"2562047h", std::chrono::hours(2562047)},
      {"2562048h", std::nullopt},  // beyond int64 nanoseconds
      {"", std::nullopt},
      {"60", std::nullopt},  // a unit is required
      {"s", std::nullopt},
      {"5d", std::nullopt},
      {"5 s", std::nullopt},
      {"1.2.3s", std::nullopt},
  };
  for (const auto& c : cases)
    EXPECT_EQ(ParseGoDuration(c.text), c.value) << c.text;
}

}  // namespace
}  // namespace switchyard::router::flow::internal
