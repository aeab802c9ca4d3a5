// The tool and reasoning parsers on golden outputs in the formats vLLM's parsers read
// (its docs and tests), and the streaming property: an output fed in pieces, split at every
// byte, sends exactly what the non-streaming parse answers.
#include "api/tool_parser.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "api/chat_output_parser.h"
#include "api/reasoning_parser.h"

namespace switchyard::api {
namespace {

using ::testing::ElementsAre;
using ::testing::FieldsAre;

std::shared_ptr<const ToolParser> Tools(std::string_view name) {
  return *MakeToolParser(name);
}

std::shared_ptr<const ReasoningParser> Reasoning(std::string_view name) {
  return *MakeReasoningParser(name);
}

// What a client assembles from a stream fed `pieces`.
ChatOutput Stream(const std::shared_ptr<const ReasoningParser>& reasoning,
                  const std::shared_ptr<const ToolParser>& tools,
                  const std::vector<std::string_view>& pieces) {
  ChatOutputParser parser(reasoning, tools);
  ChatOutput out;
  auto take = [&out](const ChatDelta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
    for (const ToolCallDelta& call : d.tool_calls) {
      if (call.first) {
        EXPECT_EQ(call.index, static_cast<int>(out.calls.size()));
        out.calls.push_back({call.name, ""});
      }
      ASSERT_LT(call.index, static_cast<int>(out.calls.size()));
      out.calls[call.index].arguments += call.arguments;
    }
  };
  for (std::string_view piece : pieces)
    take(parser.Push(piece));
  take(parser.Finish());
  return out;
}

void ExpectSame(const ChatOutput& a, const ChatOutput& b, const std::string& where) {
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
  }
}

// Streams split in two at every byte, and byte by byte, answer as Complete does.
void ExpectStreamsAsComplete(const std::shared_ptr<const ReasoningParser>& reasoning,
                             const std::shared_ptr<const ToolParser>& tools,
                             std::string_view text) {
  const ChatOutput whole = ChatOutputParser(reasoning, tools).Complete(text);
  for (size_t k = 0; k <= text.size(); ++k)
    ExpectSame(Stream(reasoning, tools, {text.substr(0, k), text.substr(k)}), whole,
               "split at " + std::to_string(k) + " of: " + std::string(text));
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i)
    bytes.push_back(text.substr(i, 1));
  ExpectSame(Stream(reasoning, tools, bytes), whole, "byte by byte: " + std::string(text));
}

TEST(HermesToolParserTest, GoldenCalls) {
  const ToolParse p = Tools("hermes")->Parse(
      "Let me check.\n<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"city\": "
      "\"Dallas\", \"unit\": \"fahrenheit\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>",
      true);
  EXPECT_EQ(p.content, "Let me check.\n");
  EXPECT_THAT(p.calls, ElementsAre(FieldsAre("get_current_weather",
                                             R"({"city": "Dallas", "unit": "fahrenheit"})"),
                                   FieldsAre("get_time", "{}")));
}

TEST(HermesToolParserTest, InvalidCallIsContent) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>";
  const ToolParse p = Tools("hermes")->Parse(text, true);
  EXPECT_EQ(p.content, text);
  EXPECT_TRUE(p.calls.empty());
  // A call without arguments fails json.loads-then-index in vLLM too.
  EXPECT_TRUE(
      Tools("hermes")->Parse("<tool_call>{\"name\": \"f\"}</tool_call>", true).calls.empty());
}

TEST(HermesToolParserTest, NoCallIsContent) {
  const ToolParse p = Tools("hermes")->Parse("The weather is fine. <tool", true);
  EXPECT_EQ(p.content, "The weather is fine. <tool");
  // Streaming holds back what may be the start of a call.
  EXPECT_EQ(Tools("hermes")->Parse("The weather is fine. <tool", false).content,
            "The weather is fine. ");
}

TEST(Llama3JsonToolParserTest, GoldenCalls) {
  const ToolParse p = Tools("llama3_json")
                          ->Parse(
                              "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": "
                              "{\"city\": \"San Francisco\"}}; "
                              "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}",
                              true);
  EXPECT_EQ(p.content, "");
  EXPECT_THAT(p.calls, ElementsAre(FieldsAre("get_weather", R"({"city": "San Francisco"})"),
                                   FieldsAre("get_time", R"({"zone": "UTC"})")));
  const ToolParse plain = Tools("llama3_json")->Parse("Hello {\"name\": 1}", true);
  EXPECT_EQ(plain.content, "Hello {\"name\": 1}");
  EXPECT_TRUE(plain.calls.empty());
}

TEST(MistralToolParserTest, GoldenCalls) {
  const ToolParse p = Tools("mistral")->Parse(
      "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 3.5, \"b\": 4}}, {\"name\": "
      "\"neg\", \"arguments\": {\"x\": -1}}]",
      true);
  EXPECT_EQ(p.content, "");
  EXPECT_THAT(p.calls, ElementsAre(FieldsAre("add", R"({"a": 3.5, "b": 4})"),
                                   FieldsAre("neg", R"({"x": -1})")));
  const ToolParse v11 = Tools("mistral")->Parse(
      "Sure.[TOOL_CALLS]add_this{\"a\": 3.5, \"b\": 4}[TOOL_CALLS]neg{\"x\": -1}", true);
  EXPECT_EQ(v11.content, "Sure.");
  EXPECT_THAT(v11.calls, ElementsAre(FieldsAre("add_this", R"({"a": 3.5, "b": 4})"),
                                     FieldsAre("neg", R"({"x": -1})")));
  EXPECT_EQ(Tools("mistral")->id_kind(), ToolCallIdKind::kMistral);
}

constexpr std::string_view kQwen3CoderCalls =
    "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan \"Fran\"\n"
    "</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=zip>\n94103\n</parameter>\n"
    "<parameter=metric>\ntrue\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
    "<function=get_time>\n</function>\n</tool_call>";

TEST(Qwen3CoderToolParserTest, GoldenCallsTypedBySchema) {
  const std::vector<ToolFunction> tools = {
      {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},)"
                      R"("days":{"type":"integer"},"zip":{"type":"string"},)"
                      R"("metric":{"type":"boolean"}}})"},
      {"get_time", ""}};
  const std::shared_ptr<const ToolParser> parser = Tools("qwen3_coder")->ForRequest(tools);
  ASSERT_NE(parser, nullptr);
  const ToolParse p = parser->Parse(kQwen3CoderCalls, true);
  EXPECT_EQ(p.content, "I'll check.\n");
  EXPECT_THAT(p.calls,
              ElementsAre(FieldsAre("get_weather", R"({"city": "San \"Fran\"", "days": 3, )"
                                                   R"("zip": "94103", "metric": true})"),
                          FieldsAre("get_time", "{}")));
  // Without the schemas a value that is JSON is taken as JSON.
  EXPECT_THAT(Tools("qwen3_xml")->Parse(kQwen3CoderCalls, true).calls[0].arguments,
              testing::HasSubstr(R"("zip": 94103)"));
}

TEST(ForcedToolParserTest, NamedAndRequired) {
  EXPECT_THAT(NewNamedToolParser("f")->Parse(R"({"a": 1})", true).calls,
              ElementsAre(FieldsAre("f", R"({"a": 1})")));
  const ToolParse required = NewRequiredToolParser()->Parse(
      R"([{"name": "f", "parameters": {"a": 1}}, {"name": "g", "parameters": {}}])", true);
  EXPECT_THAT(required.calls, ElementsAre(FieldsAre("f", R"({"a": 1})"), FieldsAre("g", "{}")));
  // Cut short by max_tokens: the complete calls stay.
  EXPECT_THAT(NewRequiredToolParser()
                  ->Parse(R"([{"name": "f", "parameters": {"a": 1}}, {"name": "g", "par)", true)
                  .calls,
              ElementsAre(FieldsAre("f", R"({"a": 1})")));
}

TEST(ReasoningParserTest, Golden) {
  const ReasoningParse r1 =
      Reasoning("deepseek_r1")->Parse("<think>hmm</think>\n\nParis.", ParseStage::kComplete);
  EXPECT_EQ(r1.reasoning, "hmm");
  EXPECT_EQ(r1.content, "\n\nParis.");
  // The start tag in the prompt: the output opens inside the block.
  EXPECT_EQ(Reasoning("deepseek_r1")->Parse("hmm</think>Paris", ParseStage::kComplete).reasoning,
            "hmm");
  // Without the end: still thinking (deepseek_r1), or no thinking (qwen3).
  EXPECT_EQ(Reasoning("deepseek_r1")->Parse("hmm", ParseStage::kComplete).reasoning, "hmm");
  const ReasoningParse q = Reasoning("qwen3")->Parse("Paris.", ParseStage::kComplete);
  EXPECT_EQ(q.reasoning, "");
  EXPECT_EQ(q.content, "Paris.");
  EXPECT_FALSE(MakeReasoningParser("nope").ok());
  EXPECT_FALSE(MakeToolParser("nope").ok());
}

TEST(ChatOutputParserTest, StreamsSplitAnywhereAsComplete) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hermes",
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Da\\\"llas\", \"n\": [1, {\"x\": \"}\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"get_time\", \"arguments\": {}}\n</tool_call>"},
      {"hermes", "No tools here, just <b>text</b> and <tool_ca"},
      {"llama3_json",
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"SF\"}}; {\"name\": "
       "\"t\", \"parameters\": {}}"},
      {"llama3_json", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"SF\"}}"},
      {"llama3_json", "Plain answer."},
      {"mistral", "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 3.5, \"b\": 4}}]"},
      {"mistral", "Sure.[TOOL_CALLS]add{\"a\": 3.5}[TOOL_CALLS]neg{\"x\": -1}"},
  };
  for (const auto& [name, text] : cases)
    ExpectStreamsAsComplete(nullptr, Tools(name), text);
  ExpectStreamsAsComplete(nullptr, Tools("qwen3_coder"), kQwen3CoderCalls);
  ExpectStreamsAsComplete(nullptr, NewNamedToolParser("f"), R"({"a": [1, 2], "b": "x}"})");
  ExpectStreamsAsComplete(
      nullptr, NewRequiredToolParser(),
      R"([{"name": "f", "parameters": {"a": 1}}, {"name": "g", "parameters": {}}])");
  for (std::string_view r : {"deepseek_r1", "qwen3"}) {
    ExpectStreamsAsComplete(Reasoning(r), nullptr, "<think>a < b </thin</think>\n\nAnswer.");
    ExpectStreamsAsComplete(Reasoning(r), nullptr, "reasoning only</think>");
    // Reasoning first, then tool calls in the content after it.
    ExpectStreamsAsComplete(Reasoning(r), Tools("hermes"),
                            "<think>I should call it.</think>\n<tool_call>\n{\"name\": \"f\", "
                            "\"arguments\": {\"a\": 1}}\n</tool_call>");
  }
  ExpectStreamsAsComplete(Reasoning("deepseek_r1"), nullptr, "<think>still thinking");
}

TEST(ChatOutputParserTest, ComposesReasoningThenTools) {
  const ChatOutput out = ChatOutputParser(Reasoning("qwen3"), Tools("hermes"))
                             .Complete(
                                 "<think>use f</think>\n\n<tool_call>\n{\"name\": \"f\", "
                                 "\"arguments\": {\"a\": 1}}\n</tool_call>");
  EXPECT_EQ(out.reasoning, "use f");
  EXPECT_EQ(out.content, "\n\n");
  EXPECT_THAT(out.calls, ElementsAre(FieldsAre("f", R"({"a": 1})")));
}

TEST(ChatOutputParserTest, StreamSendsNameFirstThenArgumentFragments) {
  ChatOutputParser parser(nullptr, Tools("hermes"));
  EXPECT_EQ(parser.Push("Hi <tool").content, "Hi ");
  EXPECT_TRUE(parser.Push("_call>{\"name\": \"f").empty());
  ChatDelta named = parser.Push("\", \"arguments\": {\"a\"");
  ASSERT_EQ(named.tool_calls.size(), 1u);
  EXPECT_TRUE(named.tool_calls[0].first);
  EXPECT_EQ(named.tool_calls[0].name, "f");
  EXPECT_EQ(named.tool_calls[0].arguments, "{\"a\"");
  ChatDelta more = parser.Push(": 1}}</tool_call>");
  ASSERT_EQ(more.tool_calls.size(), 1u);
  EXPECT_FALSE(more.tool_calls[0].first);
  EXPECT_EQ(more.tool_calls[0].arguments, ": 1}");
}

}  // namespace
}  // namespace switchyard::api
