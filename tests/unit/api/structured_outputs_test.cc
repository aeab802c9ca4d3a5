// response_format json_schema and vLLM's structured_outputs: what parses, and what is refused
// (one constraint at a time, no unknown options).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/error.h"

namespace switchyard::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<CompletionRequest> Parse(const std::string& fields) {
  return ParseCompletionRequest(R"({"prompt": "x", )" + fields + "}", RequestLimits{});
}

TEST(StructuredOutputsTest, JsonSchemaResponseFormatKeepsTheSchema) {
  auto r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "hi"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "n",
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})",
                            RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->sampling.response_format.has_value());
  EXPECT_EQ(r->sampling.response_format->type, "json_schema");
  EXPECT_EQ(r->sampling.response_format->schema,
            R"({"type":"object","properties":{"a":{"type":"integer"}}})");
}

TEST(StructuredOutputsTest, ParsesEachConstraint) {
  auto json = Parse(R"("structured_outputs": {"json": {"type": "null"}})");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->sampling.structured_outputs->json, R"({"type":"null"})");
  auto json_text = Parse(R"("structured_outputs": {"json": "{\"type\": \"null\"}"})");
  ASSERT_TRUE(json_text.ok()) << json_text.status();
  EXPECT_EQ(json_text->sampling.structured_outputs->json, R"({"type": "null"})");
  auto choice = Parse(R"("structured_outputs": {"choice": ["yes", "no"], "regex": null})");
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_THAT(*choice->sampling.structured_outputs->choice, ElementsAre("yes", "no"));
  auto object = Parse(R"("structured_outputs": {"json_object": true,
                          "disable_any_whitespace": true})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_TRUE(object->sampling.structured_outputs->json_object);
  auto regex = Parse(R"("structured_outputs": {"regex": "a+"})");
  ASSERT_TRUE(regex.ok()) << regex.status();
  EXPECT_EQ(regex->sampling.structured_outputs->regex, "a+");
}

TEST(StructuredOutputsTest, RefusesBadShapes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("structured_outputs": {})", "none are specified"},
      {R"("structured_outputs": {"json": {}, "choice": ["a"]})", "multiple"},
      {R"("structured_outputs": {"json_object": false})", "none are specified"},
      {R"("structured_outputs": {"choice": "a", "colour": 1})", "takes only"},
      {R"("structured_outputs": {"json": 3})", "JSON schema"},
      {R"("structured_outputs": {"choice": [1]})", ""},
      {R"("structured_outputs": {"whitespace_pattern": " *", "json_object": true})",
       "whitespace_pattern"},
      {R"("structured_outputs": [1])", "dictionary"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n"}})",
       "json_schema.schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": 1})", "dictionary"},
  };
  for (const auto& [fields, fragment] : cases) {
    auto r = Parse(fields);
    ASSERT_FALSE(r.ok()) << fields;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << fields;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(fragment)) << fields;
  }
}

}  // namespace
}  // namespace switchyard::api
