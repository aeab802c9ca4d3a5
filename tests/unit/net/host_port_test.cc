#include "net/host_port.h"

#include "gtest/gtest.h"

namespace switchyard::net {
namespace {

TEST(HostPortTest, ParsesNamesAddressesAndBracketedV6) {
  absl::StatusOr<HostPort> name = ParseHostPort("redis.local:6379");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->host, "redis.local");
  EXPECT_EQ(name->port, 6379);
  absl::StatusOr<HostPort> v6 = ParseHostPort("[::1]:8000");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8000);
  EXPECT_EQ(ParseHostPort("127.0.0.1:65535")->port, 65535);
}

TEST(HostPortTest, RefusesWhatIsNotHostColonPort) {
  for (const char* bad : {"", "redis", ":6379", "redis:", "redis:0", "redis:65536", "redis:6x",
                          "redis:-1", "[::1:80", "[]:80", "a b:80", "user@host:80", "h/x:80"}) {
    const absl::StatusOr<HostPort> parsed = ParseHostPort(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    if (!parsed.ok())
      EXPECT_NE(parsed.status().message().find(bad), std::string_view::npos) << bad;
  }
}

}  // namespace
}  // namespace switchyard::net
