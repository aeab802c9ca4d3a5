#include "net/shared_body.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace switchyard::net {
namespace {

TEST(SharedBodyTest, CopiesShareTheBytesMovedIn) {
  std::string prompt(64 << 10, 'x');
  const char* const bytes = prompt.data();
  SharedBody body = std::move(prompt);
  // Moved in, not copied; and every copy reads the same bytes.
  EXPECT_EQ(body.data(), bytes);
  const SharedBody copy = body;
  EXPECT_EQ(copy.data(), bytes);
  EXPECT_EQ(copy.size(), size_t{64 << 10});
  // A new body for one copy leaves the other as it was.
  body = "{}";
  EXPECT_EQ(body, "{}");
  EXPECT_EQ(copy.data(), bytes);
}

TEST(SharedBodyTest, EmptyAndLiteral) {
  const SharedBody none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.view(), "");
  EXPECT_TRUE(SharedBody(std::string()).empty());
  const SharedBody literal = "hello";
  EXPECT_EQ(literal.size(), 5u);
  EXPECT_EQ(std::string_view(literal), "hello");
}

}  // namespace
}  // namespace switchyard::net
