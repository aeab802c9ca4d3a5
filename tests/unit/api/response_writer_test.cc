#include "api/response_writer.h"

#include "gtest/gtest.h"

#include "api/error.h"

namespace switchyard::api {
namespace {

const ResponseHeader kCmpl = {"cmpl-00000000000000010000000000000002", 1700000000, "tiny"};
const ResponseHeader kChat = {"chatcmpl-abc", 1700000000, "tiny"};

TEST(ResponseWriterTest, Ids) {
  EXPECT_EQ(CompletionId(1, 2), "cmpl-00000000000000010000000000000002");
  EXPECT_EQ(ChatCompletionId(0xabcdef, 0), "chatcmpl-0000000000abcdef0000000000000000");
}

TEST(ResponseWriterTest, CompletionGolden) {
  CompletionChoice choice;
  choice.text = "Hi \"there\"";
  choice.finish_reason = "length";
  EXPECT_EQ(CompletionResponse(kCmpl, {choice}, Usage{5, 3, std::nullopt}),
            R"({"id":"cmpl-00000000000000010000000000000002","object":"text_completion",)"
            R"("created":1700000000,"model":"tiny","choices":[{"index":0,"text":"Hi \"there\"",)"
            R"("logprobs":null,"finish_reason":"length","stop_reason":null}],)"
            R"("usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,)"
            R"("prompt_tokens_details":null}})");
}

TEST(ResponseWriterTest, CompletionLogprobsAndCachedTokensGolden) {
  CompletionChoice choice;
  choice.text = "ab";
  choice.finish_reason = "stop";
  choice.stop_reason = "\n";
  choice.logprobs = std::vector<TokenLogprob>{{"a", -0.5, {{"a", -0.5}, {"b", -1.0}, {"a", -2.0}}},
                                              {"b", -std::numeric_limits<double>::infinity(), {}}};
  EXPECT_EQ(CompletionResponse(kCmpl, {choice}, Usage{4, 2, 3}, R"({"done":true})"),
            R"({"id":"cmpl-00000000000000010000000000000002","object":"text_completion",)"
            R"("created":1700000000,"model":"tiny","choices":[{"index":0,"text":"ab",)"
            R"("logprobs":{"text_offset":[0,1],"token_logprobs":[-0.5,-9999.0],)"
            R"("tokens":["a","b"],"top_logprobs":[{"a":-0.5,"b":-1.0},{}]},)"
            R"("finish_reason":"stop","stop_reason":"\n"}],)"
            R"("usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2,)"
            R"("prompt_tokens_details":{"cached_tokens":3}},"kv_transfer_params":{"done":true}})");
}

// text_offset counts characters as vLLM's Python len() does, not bytes.
TEST(ResponseWriterTest, TextOffsetsCountCharacters) {
  EXPECT_EQ(TextOffsetLength(""), 0u);
  EXPECT_EQ(TextOffsetLength("caf\xC3\xA9"), 4u);
  EXPECT_EQ(TextOffsetLength("\xF0\x9F\x98\x80!"), 2u);
  EXPECT_EQ(TextOffsetLength("\xFF\xFE"), 2u);  // each invalid byte is one U+FFFD
  EXPECT_EQ(TextOffsetLength("\xE2\x82"), 1u);  // a cut sequence is one U+FFFD
  CompletionChoice choice;
  choice.text = "\xCF\x80x";
  choice.text_offset_base = 3;
  choice.logprobs = std::vector<TokenLogprob>{{"\xCF\x80", -0.5, {}}, {"x", -1.0, {}}};
  const std::string body = CompletionResponse(kCmpl, {choice}, Usage{1, 2, std::nullopt});
  EXPECT_NE(body.find(R"("text_offset":[3,4])"), std::string::npos) << body;
}

// An echoed prompt in the completions format (vLLM): the first token's logprob and top
// entries are null; the others are the prompt token then its position's top ids, cut to
// logprobs + 1 entries; offsets run through the prompt into the completion.
TEST(ResponseWriterTest, EchoedPromptLogprobsGolden) {
  const PromptLogprobs positions = {
      {{7, -2.5, 3, "b"}, {1, -0.5, 1, "c"}, {2, -1.5, 2, "d"}},
      {{1, -0.25, 1, "c"}, {2, -2.0, 2, "d"}},
  };
  std::vector<TokenLogprob> logprobs = EchoedPromptLogprobs("<s>", positions, 1);
  ASSERT_EQ(logprobs.size(), 3u);
  EXPECT_FALSE(logprobs[0].logprob.has_value());
  logprobs.push_back({"x", -0.125, {{"x", -0.125}}});
  CompletionChoice choice;
  choice.text = "abcx";
  choice.logprobs = std::move(logprobs);
  const std::string body = CompletionResponse(kCmpl, {choice}, Usage{3, 1, std::nullopt});
  EXPECT_NE(body.find(R"("logprobs":{"text_offset":[0,3,4,5],)"
                      R"("token_logprobs":[null,-2.5,-0.25,-0.125],)"
                      R"("tokens":["<s>","b","c","x"],)"
                      R"("top_logprobs":[null,{"b":-2.5,"c":-0.5},{"c":-0.25,"d":-2.0},)"
                      R"({"x":-0.125}]})"),
            std::string::npos)
      << body;
}

TEST(ResponseWriterTest, ChatGolden) {
  ChatChoice choice;
  choice.content = "caf\xC3\xA9 \xFF";  // Invalid byte from a model becomes U+FFFD.
  choice.finish_reason = "stop";
  choice.logprobs = std::vector<TokenLogprob>{{"\xC3\xA9", -1e-05, {{"\xC3\xA9", -1e-05}}}};
  EXPECT_EQ(ChatCompletionResponse(kChat, {choice}, Usage{7, 1, std::nullopt}),
            R"({"id":"chatcmpl-abc","object":"chat.completion","created":1700000000,)"
            R"("model":"tiny","choices":[{"index":0,"message":{"role":"assistant",)"
            "\"content\":\"caf\xC3\xA9 \xEF\xBF\xBD\",\"tool_calls\":[]},"
            "\"logprobs\":{\"content\":[{\"token\":\"\xC3\xA9\",\"logprob\":-1e-05,"
            R"("bytes":[195,169],"top_logprobs":[{"token":")"
            "\xC3\xA9"
            R"(","logprob":-1e-05,"bytes":[195,169]}]}]},"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":7,"total_tokens":8,"completion_tokens":1,)"
            R"("prompt_tokens_details":null}})");
}

TEST(ResponseWriterTest, ChatStreamGolden) {
  ChatChoice first;
  EXPECT_EQ(ChatCompletionChunk(kChat, first, true),
            "data: "
            R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"tiny","choices":[{"index":0,"delta":{"role":"assistant","content":""},)"
            R"("logprobs":null,"finish_reason":null}]})"
            "\n\n");
  ChatChoice last;
  last.content = "!";
  last.finish_reason = "length";
  EXPECT_EQ(ChatCompletionChunk(kChat, last, false),
            "data: "
            R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"tiny","choices":[{"index":0,"delta":{"content":"!"},)"
            R"("logprobs":null,"finish_reason":"length"}]})"
            "\n\n");
  EXPECT_EQ(ChatUsageChunk(kChat, Usage{3, 2, 0}),
            "data: "
            R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"tiny","choices":[],"usage":{"prompt_tokens":3,"total_tokens":5,)"
            R"("completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}})"
            "\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(ResponseWriterTest, CompletionStreamGolden) {
  CompletionChoice choice;
  choice.index = 1;
  choice.text = "x";
  EXPECT_EQ(CompletionChunk(kCmpl, choice),
            "data: "
            R"({"id":"cmpl-00000000000000010000000000000002","object":"text_completion",)"
            R"("created":1700000000,"model":"tiny","choices":[{"index":1,"text":"x",)"
            R"("logprobs":null,"finish_reason":null,"stop_reason":null}]})"
            "\n\n");
  EXPECT_EQ(CompletionUsageChunk(kCmpl, Usage{1, 1, std::nullopt}),
            "data: "
            R"({"id":"cmpl-00000000000000010000000000000002","object":"text_completion",)"
            R"("created":1700000000,"model":"tiny","choices":[],"usage":{"prompt_tokens":1,)"
            R"("total_tokens":2,"completion_tokens":1,"prompt_tokens_details":null}})"
            "\n\n");
}

TEST(ResponseWriterTest, SseError) {
  EXPECT_EQ(SseError(absl::InternalError("engine failed")),
            "data: "
            R"({"error":{"message":"engine failed","type":"InternalServerError",)"
            R"("param":null,"code":500}})"
            "\n\n");
}

TEST(ResponseWriterTest, ModelListGolden) {
  EXPECT_EQ(ModelList({{"tiny", 1700000000, "", 2048}}),
            R"({"object":"list","data":[{"id":"tiny","object":"model","created":1700000000,)"
            R"("owned_by":"switchyard","root":"tiny","parent":null,"max_model_len":2048}]})");
}

TEST(ResponseWriterTest, TokenizeRoundTrip) {
  auto request = ParseTokenizeRequest(
      R"({"model":"tiny","prompt":"hi","add_special_tokens":false,"return_token_strs":true})",
      RequestLimits{});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->prompt, "hi");
  EXPECT_FALSE(request->add_special_tokens);
  EXPECT_TRUE(request->return_token_strs);
  const std::vector<std::string> strs = {"h", "i"};
  EXPECT_EQ(TokenizeResponse({71, 72}, 2048, &strs),
            R"({"count":2,"max_model_len":2048,"tokens":[71,72],"token_strs":["h","i"]})");
  EXPECT_EQ(TokenizeResponse({}, 2048, nullptr), R"({"count":0,"max_model_len":2048,"tokens":[]})");

  auto detok = ParseDetokenizeRequest(R"({"tokens":[71,72]})", RequestLimits{});
  ASSERT_TRUE(detok.ok()) << detok.status();
  EXPECT_EQ(detok->tokens, (std::vector<int32_t>{71, 72}));
  EXPECT_EQ(DetokenizeResponse("h\"i"), R"({"prompt":"h\"i"})");
}

}  // namespace
}  // namespace switchyard::api
