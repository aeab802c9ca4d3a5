// FieldReader finds exactly the keys present, whatever its presence filter lets through.
#include "api/internal/json_fields.h"

#include <optional>
#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::api::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

simdjson::dom::object ParseObject(simdjson::dom::parser* parser, std::string_view json) {
  simdjson::dom::object object;
  EXPECT_EQ(parser->parse(json.data(), json.size()).get(object), simdjson::SUCCESS) << json;
  return object;
}

int64_t IntOf(std::optional<simdjson::dom::element> value) {
  int64_t v = -1;
  EXPECT_TRUE(value.has_value());
  if (value.has_value()) {
    EXPECT_EQ(value->get(v), simdjson::SUCCESS);
  }
  return v;
}

TEST(FieldReaderTest, FindsPresentKeysAndReportsTheUnreadInDocumentOrder) {
  simdjson::dom::parser parser;
  FieldReader fields(ParseObject(&parser, R"({"b": 2, "a": 1, "n": null, "z": 26, "": 0})"));
  EXPECT_EQ(IntOf(fields.Get("a")), 1);
  EXPECT_FALSE(fields.Get("n").has_value());  // null reads as absent, and counts as read
  EXPECT_FALSE(fields.Get("c").has_value());
  EXPECT_FALSE(fields.Get("aa").has_value());
  EXPECT_THAT(fields.UnknownKeys(), ElementsAre("b", "z", ""));
  EXPECT_EQ(IntOf(fields.Get("")), 0);
  EXPECT_THAT(fields.UnknownKeys(), ElementsAre("b", "z"));
}

TEST(FieldReaderTest, KeysThatShareLengthAndEndBytesStayApart) {
  // Same length, first and last byte: the filter cannot tell these apart, the scan must.
  simdjson::dom::parser parser;
  FieldReader fields(ParseObject(&parser, R"({"max_tokens": 16, "top_p": 1})"));
  EXPECT_FALSE(fields.Get("min_tokens").has_value());
  EXPECT_FALSE(fields.Get("mxx_tokens").has_value());
  EXPECT_FALSE(fields.Get("tip_p").has_value());
  EXPECT_THAT(fields.UnknownKeys(), ElementsAre("max_tokens", "top_p"));
  std::optional<int64_t> max_tokens;
  ASSERT_TRUE(fields.Int("max_tokens", 0, 100, &max_tokens).ok());
  EXPECT_EQ(max_tokens, 16);
  EXPECT_THAT(fields.UnknownKeys(), ElementsAre("top_p"));
}

TEST(FieldReaderTest, TakesTheFirstOfRepeatedKeys) {
  simdjson::dom::parser parser;
  const simdjson::dom::object object = ParseObject(&parser, R"({"seed": 1, "seed": 2})");
  FieldReader fields(object);
  EXPECT_FALSE(fields.CheckNoDuplicateKeys().ok());
  EXPECT_EQ(IntOf(fields.Get("seed")), 1);
  EXPECT_THAT(fields.UnknownKeys(), ElementsAre("seed"));
}

TEST(FieldReaderTest, KeysSharingAKeyBitAreComparedInFull) {
  simdjson::dom::parser parser;
  // Same length, first and last bytes: the same KeyBit, yet distinct keys.
  EXPECT_TRUE(
      FieldReader(ParseObject(&parser, R"({"axb": 1, "ayb": 2})")).CheckNoDuplicateKeys().ok());
  EXPECT_FALSE(FieldReader(ParseObject(&parser, R"({"axb": 1, "ayb": 2, "axb": 3})"))
                   .CheckNoDuplicateKeys()
                   .ok());
  EXPECT_TRUE(FieldReader(ParseObject(&parser, "{}")).CheckNoDuplicateKeys().ok());
}

TEST(FieldReaderTest, AnEmptyObjectHasNoKeys) {
  simdjson::dom::parser parser;
  FieldReader fields(ParseObject(&parser, "{}"));
  EXPECT_FALSE(fields.Get("").has_value());
  EXPECT_FALSE(fields.Get("model").has_value());
  EXPECT_THAT(fields.UnknownKeys(), IsEmpty());
}

}  // namespace
}  // namespace switchyard::api::internal
