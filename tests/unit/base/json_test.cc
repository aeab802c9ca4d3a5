#include "base/json.h"

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

TEST(JsonTest, WritesStringsAsPythonJsonDumps) {
  EXPECT_EQ(JsonString("a\"b\\c\n\t\x01"), R"("a\"b\\c\n\t\u0001")");
  // json.dumps("é😀", ensure_ascii=True) == '"\\u00e9\\ud83d\\ude00"'
  EXPECT_EQ(JsonString("\xC3\xA9\xF0\x9F\x98\x80", true), R"("\u00e9\ud83d\ude00")");
  EXPECT_EQ(JsonString("\xC3\xA9", false), "\"\xC3\xA9\"");
  EXPECT_EQ(JsonString("\xFF", false), "\"\xEF\xBF\xBD\"");
}

TEST(JsonTest, ParsesAndReportsErrorsWithSource) {
  auto doc = JsonDocument::Parse(R"({"a": [1, 2]})", "inline");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(int64_t((*doc)->root()["a"].at(1)), 2);
  auto bad = JsonDocument::Parse("{", "my.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("my.json"), std::string::npos);
}

TEST(JsonTest, IntegersBeyond64BitsBecomeFloats) {
  auto doc = JsonDocument::Parse(
      R"({"model_max_length": 1000000000000000019884624838656, "s": "12345678901234567890"})",
      "tokenizer_config.json");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_DOUBLE_EQ(double((*doc)->root()["model_max_length"]), 1e30);
  EXPECT_EQ(std::string_view((*doc)->root()["s"]), "12345678901234567890");
}

}  // namespace
}  // namespace switchyard::base
