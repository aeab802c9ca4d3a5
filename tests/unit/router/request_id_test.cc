#include "router/request_id.h"

#include <regex>
#include <set>
#include <string>

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
