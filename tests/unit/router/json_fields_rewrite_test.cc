// RewriteTopLevelFields and WithCacheSalt: kept fields pass as their raw text, dropped ones
// go, appended ones follow; a body that is not a JSON object is an error.
#include "router/internal/json_fields_rewrite.h"

#include "gtest/gtest.h"

namespace switchyard::router::internal {
namespace {

TEST(JsonFieldsRewriteTest, KeepsRawTextDropsAndAppends) {
  bool found = false;
  absl::StatusOr<std::string> out =
      RewriteTopLevelFields(R"({"a": 1.50, "b" : {"x":[1, 2]}, "c":"\u00e9", "d": null})",
                            {"b", "d"}, R"(,"e":true)", &found);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"({"a":1.50,"c":"\u00e9","e":true})");
  EXPECT_TRUE(found);
  // Nothing kept: no comma before the appended field.
  out = RewriteTopLevelFields(R"({"b":1})", {"b"}, R"(,"e":1)");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, R"({"e":1})");
  for (const char* bad : {"[1]", "\"s\"", "{", ""})
    EXPECT_FALSE(RewriteTopLevelFields(bad, {}, "").ok()) << bad;
}

TEST(JsonFieldsRewriteTest, WithCacheSaltReplacesTheClientsSalt) {
  absl::StatusOr<std::string> out =
      WithCacheSalt(R"({"prompt":"hi","cache_salt":"mine"})", "tenant\"salt");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"({"prompt":"hi","cache_salt":"tenant\"salt"})");
  out = WithCacheSalt(R"({"prompt":"hi"})", "s");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, R"({"prompt":"hi","cache_salt":"s"})");
}

}  // namespace
}  // namespace switchyard::router::internal
