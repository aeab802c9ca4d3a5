#include "net/query_string.h"

#include "gtest/gtest.h"

namespace switchyard::net {
namespace {

TEST(QueryStringTest, SplitsAndDecodesPairs) {
  absl::StatusOr<QueryParams> params = ParseQueryString("a=1&b=x%20y+z&&flag&c=&%41=%3d%3D");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(*params,
            (QueryParams{{"a", "1"}, {"b", "x y z"}, {"flag", ""}, {"c", ""}, {"A", "=="}}));
  EXPECT_EQ(*ParseQueryString(""), QueryParams{});
  // Only the first '=' splits.
  EXPECT_EQ(*ParseQueryString("k=v=w"), (QueryParams{{"k", "v=w"}}));
}

TEST(QueryStringTest, MalformedEscapesAreErrors) {
  for (const char* bad : {"a=%", "a=%4", "a=%zz", "%g1=1", "a=1&b=%2"}) {
    absl::StatusOr<QueryParams> params = ParseQueryString(bad);
    EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(QueryStringTest, BooleansAsFastApiReadsThem) {
  for (const char* yes : {"true", "True", "1", "yes", "ON"})
    EXPECT_EQ(ParseQueryBool(yes), true) << yes;
  for (const char* no : {"false", "FALSE", "0", "no", "off"})
    EXPECT_EQ(ParseQueryBool(no), false) << no;
  for (const char* neither : {"", "2", "truee", "y"})
    EXPECT_EQ(ParseQueryBool(neither), std::nullopt) << neither;
}

}  // namespace
}  // namespace switchyard::net
