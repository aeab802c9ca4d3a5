// tools / tool_choice validation with vLLM's messages and params, the forced-choice schemas,
// and the tool-call shapes of responses and stream chunks.
#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simdjson.h"

#include "api/chat_request.h"
#include "api/error.h"
#include "api/response_writer.h"

namespace switchyard::api {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kTools =
    R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "integer"}}}}},
       {"type": "function", "function": {"name": "g"}}])";

absl::StatusOr<ChatRequest> Parse(std::string_view extra) {
  return ParseChatRequest(
      std::string(R"({"messages": [{"role": "user", "content": "hi"}])") + std::string(extra) + "}",
      RequestLimits{});
}

TEST(ToolChoiceTest, DefaultsAsVllm) {
  EXPECT_EQ(Parse("")->tools.choice, ToolChoiceMode::kNone);
  auto r = Parse(std::string(R"(, "tools": )") + std::string(kTools));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tools.choice, ToolChoiceMode::kAuto);  // tools without tool_choice: auto
  EXPECT_EQ(r->tools.functions.size(), 2u);
  EXPECT_EQ(Parse(R"(, "tool_choice": "none")")->tools.choice, ToolChoiceMode::kNone);
  auto named = Parse(std::string(R"(, "tools": )") + std::string(kTools) +
                     R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->tools.choice, ToolChoiceMode::kNamed);
  EXPECT_EQ(named->tools.choice_name, "g");
}

TEST(ToolChoiceTest, ErrorsAsVllm) {
  struct Case {
    std::string extra, param, message;
  };
  const std::string tools = std::string(R"(, "tools": )") + std::string(kTools);
  const Case cases[] = {
      {R"(, "tool_choice": "required")", "tool_choice",
       "When using `tool_choice`, `tools` must be set."},
      {R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})", "tool_choice",
       "When using `tool_choice`, `tools` must be set."},
      {R"(, "tools": [])", "tools", "`tools` must not be an empty array."},
      {tools + R"(, "tool_choice": {"type": "function", "function": {"name": "h"}})", "tool_choice",
       "The tool specified in `tool_choice` does not match any of the specified "
       "`tools`"},
      {tools + R"(, "tool_choice": {"type": "function"})", "tool_choice.function",
       "Invalid value for `function`: `None` in `tool_choice`!"},
      {tools + R"(, "tool_choice": {"function": {}})", "tool_choice.function.name",
       "Expected field `name` in `function` in `tool_choice`!"},
      {tools + R"(, "tool_choice": "sometimes")", "tool_choice",
       "Invalid value for `tool_choice`: sometimes!"},
      {R"(, "tools": [{"type": "function"}])", "tools[0].function", "Field required"},
  };
  for (const Case& c : cases) {
    auto r = Parse(c.extra);
    ASSERT_FALSE(r.ok()) << c.extra;
    EXPECT_EQ(ErrorParam(r.status()), c.param) << c.extra;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.extra;
  }
}

TEST(ToolChoiceTest, ForcedSchemas) {
  auto named = Parse(std::string(R"(, "tools": )") + std::string(kTools) +
                     R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})");
  EXPECT_EQ(*ForcedToolSchema(named->tools), R"({"type":"object","properties":{}})");
  auto required =
      Parse(std::string(R"(, "tools": )") + std::string(kTools) + R"(, "tool_choice": "required")");
  const absl::StatusOr<std::string> schema = ForcedToolSchema(required->tools);
  ASSERT_TRUE(schema.ok()) << schema.status();
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.parse(*schema);
  EXPECT_EQ(int64_t(root["minItems"]), 1);
  EXPECT_EQ(root["items"]["anyOf"].get_array().size(), 2u);
  EXPECT_EQ(std::string_view(root["items"]["anyOf"].at(0)["properties"]["name"]["enum"].at(0)),
            "f");
  // f's $defs are hoisted so that its "#/$defs/A" resolves from the root.
  EXPECT_EQ(std::string_view(root["$defs"]["A"]["type"]), "integer");
}

TEST(ToolChoiceTest, ResponseShapes) {
  ChatChoice c;
  c.content_null = true;
  c.tool_calls.push_back({0, "chatcmpl-tool-1", "f", R"({"a": 1})"});
  c.finish_reason = "tool_calls";
  const std::string body = ChatCompletionResponse({"id", 1, "m"}, {c}, Usage{});
  EXPECT_THAT(body, HasSubstr(R"("message":{"role":"assistant","content":null,"tool_calls":[{"id":)"
                              R"("chatcmpl-tool-1","type":"function","function":{"name":"f",)"
                              R"("arguments":"{\"a\": 1}"}}]})"));
  ChatChoice first;
  first.tool_calls.push_back({0, "chatcmpl-tool-1", "f", ""});
  EXPECT_THAT(ChatCompletionChunk({"id", 1, "m"}, first, false),
              HasSubstr(R"("delta":{"tool_calls":[{"id":"chatcmpl-tool-1","type":"function",)"
                        R"("index":0,"function":{"name":"f","arguments":""}}]})"));
  ChatChoice fragment;
  fragment.tool_calls.push_back({0, "", "", "{\"a"});
  EXPECT_THAT(ChatCompletionChunk({"id", 1, "m"}, fragment, false),
              HasSubstr(R"("delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]})"));
  EXPECT_THAT(ToolCallId(ToolCallIdKind::kRandom, 1, 2),
              testing::MatchesRegex("chatcmpl-tool-[0-9a-f]{32}"));
  EXPECT_THAT(ToolCallId(ToolCallIdKind::kMistral, 123456789, 987654321),
              testing::MatchesRegex("[a-zA-Z0-9]{9}"));
}

}  // namespace
}  // namespace switchyard::api
