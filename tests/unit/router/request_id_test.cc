#include "router/request_id.h"

#include <array>
#include <bitset>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace switchyard::router {
namespace {

TEST(RequestIdTest, NewIdsAreDistinctUuidV4s) {
  const std::regex uuid4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewRequestId();
    EXPECT_TRUE(std::regex_match(id, uuid4)) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(RequestIdTest, EveryRandomDigitTakesEveryHexValue) {
  // Per position, the hex values seen over many ids: all 16 where the digit is random, only
  // 4 at the version and only 8..b at the variant. A digit stuck on a value (a wrong shift
  // or table entry) shows as a missing one.
  const std::string_view hex = "0123456789abcdef";
  std::array<std::bitset<16>, 36> seen;
  for (int i = 0; i < 5000; ++i) {
    const std::string id = NewRequestId();
    ASSERT_EQ(id.size(), 36u);
    for (size_t pos = 0; pos < id.size(); ++pos) {
      if (pos == 8 || pos == 13 || pos == 18 || pos == 23) {
        ASSERT_EQ(id[pos], '-') << id;
        continue;
      }
      const size_t value = hex.find(id[pos]);
      ASSERT_NE(value, std::string_view::npos) << id;
      seen[pos].set(value);
    }
  }
  for (size_t pos = 0; pos < seen.size(); ++pos) {
    if (pos == 8 || pos == 13 || pos == 18 || pos == 23)
      continue;
    if (pos == 14)
      EXPECT_EQ(seen[pos], std::bitset<16>(1 << 4)) << pos;
    else if (pos == 19)
      EXPECT_EQ(seen[pos], std::bitset<16>(0xf00)) << pos;
    else
      EXPECT_TRUE(seen[pos].all()) << pos;
  }
}

TEST(RequestIdTest, ThreadsDrawDifferentIds) {
  std::string first;
  std::string second;
  std::thread([&] { first = NewRequestId(); }).join();
  std::thread([&] { second = NewRequestId(); }).join();
  EXPECT_EQ(first.size(), 36u);
  EXPECT_NE(first, second);
}

TEST(RequestIdTest, AClientIdIsKeptAndAMissingOneMade) {
  net::HttpRequest request;
  request.headers = {{"x-request-id", "trace-42/abc"}};
  EXPECT_EQ(RequestIdOf(request), "trace-42/abc");
  request.headers = {{"x-request-id", ""}};
  EXPECT_EQ(RequestIdOf(request).size(), 36u);
  request.headers.clear();
  const std::string a = RequestIdOf(request);
  EXPECT_EQ(a.size(), 36u);
  EXPECT_NE(RequestIdOf(request), a);
}

}  // namespace
}  // namespace switchyard::router
