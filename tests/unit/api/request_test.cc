// Good requests parse into the expected typed fields.
#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/error.h"

namespace switchyard::api {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(CompletionRequestTest, ParsesAllFields) {
  auto r = ParseCompletionRequest(R"({
      "model": "tiny", "prompt": "Hello", "max_tokens": 16, "n": 2, "best_of": 2,
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "seed": -7, "stop": "\n", "stop_token_ids": [2, 3], "logprobs": 5, "echo": true,
      "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true,
      "skip_special_tokens": false, "spaces_between_special_tokens": false,
      "include_stop_str_in_output": true, "min_tokens": 2, "logit_bias": {"50256": -100},
      "user": "u", "cache_salt": "salt", "priority": -1, "request_id": "r1",
      "kv_transfer_params": {"do_remote_decode": true, "x": [1, 2]},
      "response_format": {"type": "json_object"}, "some_future_field": {"a": 1}})",
                                  RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "tiny");
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompts[0].text, "Hello");
  EXPECT_EQ(r->logprobs, 5);
  EXPECT_TRUE(r->echo);
  const SamplingRequest& s = r->sampling;
  EXPECT_EQ(s.max_tokens, 16);
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.best_of, 2);
  EXPECT_EQ(s.temperature, 0.5);
  EXPECT_EQ(s.top_p, 0.9);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.min_p, 0.05);
  EXPECT_EQ(s.presence_penalty, 0.5);
  EXPECT_EQ(s.frequency_penalty, -0.5);
  EXPECT_EQ(s.repetition_penalty, 1.1);
  EXPECT_EQ(s.seed, -7);
  EXPECT_THAT(s.stop, ElementsAre("\n"));
  EXPECT_THAT(s.stop_token_ids, ElementsAre(2, 3));
  EXPECT_TRUE(s.include_usage_in_stream());
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_FALSE(s.skip_special_tokens);
  EXPECT_FALSE(s.spaces_between_special_tokens);
  EXPECT_TRUE(s.include_stop_str_in_output);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_THAT(s.logit_bias, ElementsAre(Pair(50256, -100.0)));
  EXPECT_EQ(s.user, "u");
  EXPECT_EQ(s.cache_salt, "salt");
  EXPECT_EQ(s.priority, -1);
  EXPECT_EQ(s.request_id, "r1");
  EXPECT_EQ(s.kv_transfer_params, R"({"do_remote_decode":true,"x":[1,2]})");
  ASSERT_TRUE(s.response_format.has_value());
  EXPECT_EQ(s.response_format->type, "json_object");
  EXPECT_THAT(s.ignored_fields, ElementsAre("some_future_field"));
}

// vLLM refuses prompt_logprobs > 0 on a stream but takes 0 (nothing to send).
TEST(CompletionRequestTest, PromptLogprobsAndContinuousUsageOnStreams) {
  auto r = ParseCompletionRequest(
      R"({"prompt": "x", "stream": true, "prompt_logprobs": 0,
          "stream_options": {"include_usage": true, "continuous_usage_stats": true}})",
      RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.prompt_logprobs, 0);
  ASSERT_TRUE(r->sampling.stream_options.has_value());
  EXPECT_TRUE(r->sampling.stream_options->continuous_usage_stats);
  auto streamed = ParseCompletionRequest(R"({"prompt": "x", "stream": true, "prompt_logprobs": 2})",
                                         RequestLimits{});
  ASSERT_FALSE(streamed.ok());
  EXPECT_EQ(HttpErrorFor(streamed.status()).http_status, 400);
  auto plain = ParseCompletionRequest(R"({"prompt": "x", "prompt_logprobs": 2})", RequestLimits{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->sampling.prompt_logprobs, 2);
}

// best_of (vLLM V0): at least n, at most max_n, and on a stream only equal to n (beam
// search, whose width is n, ignores it).
TEST(CompletionRequestTest, BestOf) {
  auto r = ParseCompletionRequest(R"({"prompt": "x", "n": 2, "best_of": 5})", RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.n, 2);
  EXPECT_EQ(r->sampling.best_of, 5);
  auto equal_streamed = ParseCompletionRequest(
      R"({"prompt": "x", "n": 2, "best_of": 2, "stream": true})", RequestLimits{});
  EXPECT_TRUE(equal_streamed.ok()) << equal_streamed.status();
  auto beam_streamed = ParseCompletionRequest(
      R"({"prompt": "x", "best_of": 4, "stream": true, "use_beam_search": true})", RequestLimits{});
  EXPECT_TRUE(beam_streamed.ok()) << beam_streamed.status();
  for (std::string_view body :
       {R"({"prompt": "x", "best_of": 3, "stream": true})",
        R"({"prompt": "x", "n": 3, "best_of": 2})", R"({"prompt": "x", "best_of": 129})"}) {
    auto bad = ParseCompletionRequest(body, RequestLimits{});
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_EQ(HttpErrorFor(bad.status()).http_status, 400) << body;
    EXPECT_EQ(ErrorParam(bad.status()).value_or(""), "best_of") << body;
  }
}

// vLLM takes max_tokens 0 with echo (the prompt alone comes back), not without it.
TEST(CompletionRequestTest, MaxTokensZeroOnlyWithEcho) {
  auto echo =
      ParseCompletionRequest(R"({"prompt": "x", "echo": true, "max_tokens": 0})", RequestLimits{});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->sampling.max_tokens, 0);
  auto plain = ParseCompletionRequest(R"({"prompt": "x", "max_tokens": 0})", RequestLimits{});
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(ErrorParam(plain.status()).value_or(""), "max_tokens");
  auto chat = ParseChatRequest(
      R"({"messages": [{"role": "user", "content": "x"}], "echo": true, "max_tokens": 0})",
      RequestLimits{});
  ASSERT_FALSE(chat.ok());
  EXPECT_EQ(ErrorParam(chat.status()).value_or(""), "max_tokens");
}

// The echoed prompt's logprobs are prompt logprobs, which beam search does not compute.
TEST(CompletionRequestTest, EchoLogprobsRefusedWithBeamSearch) {
  auto r = ParseCompletionRequest(
      R"({"prompt": "x", "echo": true, "logprobs": 1, "use_beam_search": true})", RequestLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrorParam(r.status()).value_or(""), "echo");
  EXPECT_TRUE(ParseCompletionRequest(R"({"prompt": "x", "echo": true, "use_beam_search": true})",
                                     RequestLimits{})
                  .ok());
}

TEST(CompletionRequestTest, DefaultsMatchVllm) {
  auto r = ParseCompletionRequest(R"({"prompt": "x"})", RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  const SamplingRequest& s = r->sampling;
  EXPECT_FALSE(s.max_tokens.has_value());
  EXPECT_EQ(s.n, 1);
  EXPECT_FALSE(s.temperature.has_value());
  EXPECT_TRUE(s.skip_special_tokens);
  EXPECT_TRUE(s.spaces_between_special_tokens);
  EXPECT_FALSE(s.stream);
  EXPECT_FALSE(s.include_usage_in_stream());
  EXPECT_TRUE(r->add_special_tokens);
  EXPECT_FALSE(r->logprobs.has_value());
}

TEST(CompletionRequestTest, PromptForms) {
  auto strings = ParseCompletionRequest(R"({"prompt": ["a", "b"]})", RequestLimits{});
  ASSERT_TRUE(strings.ok());
  EXPECT_THAT(strings->prompts, ElementsAre(Prompt{"a", {}, false}, Prompt{"b", {}, false}));
  auto ids = ParseCompletionRequest(R"({"prompt": [1, 2, 3]})", RequestLimits{});
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(ids->prompts, ElementsAre(Prompt{"", {1, 2, 3}, true}));
  auto batches = ParseCompletionRequest(R"({"prompt": [[1], [2, 3]]})", RequestLimits{});
  ASSERT_TRUE(batches.ok());
  EXPECT_THAT(batches->prompts, ElementsAre(Prompt{"", {1}, true}, Prompt{"", {2, 3}, true}));
  // Pydantic accepts an integral float for an int field.
  auto n = ParseCompletionRequest(R"({"prompt": "x", "n": 2.0})", RequestLimits{});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->sampling.n, 2);
}

TEST(CompletionRequestTest, StreamOptionsDefaultIncludeUsage) {
  auto r = ParseCompletionRequest(R"({"prompt": "x", "stream": true, "stream_options": {}})",
                                  RequestLimits{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->sampling.include_usage_in_stream());
}

TEST(ChatRequestTest, ParsesMessagesAndExtras) {
  auto r = ParseChatRequest(R"({
      "model": "tiny",
      "messages": [
        {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": "hi", "name": "bob"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"}],
      "max_tokens": 5, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3,
      "add_generation_prompt": true, "chat_template_kwargs": {"enable_thinking": false, "tokenize": true},
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto",
      "parallel_tool_calls": false, "reasoning_effort": "low"})",
                            RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[0].content, "a\nb");
  EXPECT_EQ(r->messages[1].name, "bob");
  EXPECT_FALSE(r->messages[2].has_content);
  EXPECT_EQ(r->messages[2].tool_calls,
            R"([{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}])");
  EXPECT_EQ(r->messages[3].tool_call_id, "c1");
  EXPECT_EQ(r->sampling.max_tokens, 9);  // max_completion_tokens wins.
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->top_logprobs, 3);
  EXPECT_THAT(r->chat_template_kwargs, ElementsAre(Pair("enable_thinking", "false")));
  EXPECT_EQ(r->tools.tools, R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(r->tools.choice, ToolChoiceMode::kAuto);
  ASSERT_EQ(r->tools.functions.size(), 1u);
  EXPECT_EQ(r->tools.functions[0].name, "f");
  EXPECT_EQ(r->tools.parallel_tool_calls, false);
  EXPECT_EQ(r->reasoning_effort, "low");
  EXPECT_TRUE(r->add_generation_prompt);
  EXPECT_FALSE(r->add_special_tokens);
}

TEST(ChatRequestTest, ContinueFinalMessage) {
  auto r = ParseChatRequest(
      R"({"messages": [{"role": "assistant", "content": "The"}],
          "add_generation_prompt": false, "continue_final_message": true})",
      RequestLimits{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->continue_final_message);
}

// A router reads the prompt or messages and the routing fields; the engine it picks checks
// the rest by its own rules.
TEST(RouteScopeTest, ReadsWhatRoutingNeedsAndLeavesTheRestToTheEngine) {
  constexpr std::string_view kCompletion = R"({"model": "tiny", "prompt": "Hello",
      "temperature": -1, "logprobs": 50, "suffix": "x", "use_beam_search": true,
      "stream": true, "cache_salt": "salt", "add_special_tokens": false})";
  EXPECT_FALSE(ParseCompletionRequest(kCompletion, RequestLimits{}).ok());
  auto r = ParseCompletionRequest(kCompletion, RequestLimits{}, ParseScope::kRoute);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompts[0].text, "Hello");
  EXPECT_TRUE(r->sampling.stream);
  EXPECT_EQ(r->sampling.cache_salt, "salt");
  EXPECT_FALSE(r->add_special_tokens);
  EXPECT_TRUE(r->sampling.ignored_fields.empty());
  EXPECT_TRUE(r->model.empty());  // the router serves one model: the engine checks it
  EXPECT_TRUE(
      ParseCompletionRequest(R"({"model": 5, "prompt": "a"})", RequestLimits{}, ParseScope::kRoute)
          .ok());

  constexpr std::string_view kChat = R"({"model": "tiny",
      "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 99, "n": -3,
      "stream": true, "cache_salt": "s", "add_generation_prompt": false,
      "chat_template_kwargs": {"enable_thinking": false}})";
  EXPECT_FALSE(ParseChatRequest(kChat, RequestLimits{}).ok());
  auto c = ParseChatRequest(kChat, RequestLimits{}, ParseScope::kRoute);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->messages.size(), 1u);
  EXPECT_TRUE(c->sampling.stream);
  EXPECT_EQ(c->sampling.cache_salt, "s");
  EXPECT_FALSE(c->add_generation_prompt);
  EXPECT_EQ(c->chat_template_kwargs.size(), 1u);
}

TEST(RouteScopeTest, WhatTheRouterReadsIsStillChecked) {
  for (std::string_view body : {
           R"({"prompt": ""})",                    // empty prompt
           R"({"prompt": 7})",                     // not a prompt
           R"({"temperature": 1})",                // no prompt
           R"({"prompt": "a", "stream": "yes"})",  // stream not a boolean
           R"({"prompt": "a", "cache_salt": 1})",  // cache_salt not a string
           R"({"prompt": "a",)",                   // not JSON
       }) {
    const absl::StatusOr<CompletionRequest> r =
        ParseCompletionRequest(body, RequestLimits{}, ParseScope::kRoute);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(HttpErrorFor(r.status()).http_status, 400) << body;
  }
  EXPECT_FALSE(ParseChatRequest(R"({"messages": []})", RequestLimits{}, ParseScope::kRoute).ok());
  EXPECT_FALSE(ParseChatRequest(R"({"messages": [{"role": "user", "content": "hi"}],
      "add_generation_prompt": true, "continue_final_message": true})",
                                RequestLimits{}, ParseScope::kRoute)
                   .ok());
}

// A body with spare room after it is parsed where it lies; what the spare bytes hold never
// changes the result.
TEST(RequestBodyTest, ParsesInPlaceWhateverFollowsTheBody) {
  for (std::string_view text : {
           R"({"prompt": "Hello", "stream": true, "cache_salt": "s"})",
           R"({"prompt": "Hello)",  // unterminated string
           R"({"prompt": [1, 2)",   // unterminated array
           R"({"prompt": "a"} x)",  // trailing bytes
           "7",
       }) {
    const absl::StatusOr<CompletionRequest> copied =
        ParseCompletionRequest(text, RequestLimits{}, ParseScope::kRoute);
    for (char spare : {'"', '}', ']', '0', '\0'}) {
      std::string body(text);
      body.append(RequestBody::kPaddingBytes, spare);
      body.resize(text.size());
      ASSERT_GE(RequestBody(body).spare_bytes(), RequestBody::kPaddingBytes);
      const absl::StatusOr<CompletionRequest> in_place =
          ParseCompletionRequest(body, RequestLimits{}, ParseScope::kRoute);
      ASSERT_EQ(in_place.status(), copied.status()) << text;
      if (copied.ok()) {
        EXPECT_EQ(in_place->prompts, copied->prompts);
        EXPECT_EQ(in_place->sampling.stream, copied->sampling.stream);
        EXPECT_EQ(in_place->sampling.cache_salt, copied->sampling.cache_salt);
      }
    }
  }
  EXPECT_EQ(RequestBody(std::string_view("{}")).spare_bytes(), 0u);
}

TEST(ResolveMaxTokensTest, ContextWindow) {
  SamplingRequest s;
  EXPECT_EQ(*ResolveMaxTokens(s, 100, 4096, "prompt"), 3996);
  s.max_tokens = 10;
  EXPECT_EQ(*ResolveMaxTokens(s, 100, 4096, "prompt"), 10);
  auto over = ResolveMaxTokens(s, 4090, 4096, "prompt");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(ErrorParam(over.status()), "max_tokens");
  EXPECT_EQ(over.status().message(),
            "This model's maximum context length is 4096 tokens. However, you requested 10 "
            "output tokens and your prompt contains at least 4090 input tokens, for a total of "
            "at least 4100 tokens.");
  auto prompt = ResolveMaxTokens(s, 5000, 4096, "messages");
  ASSERT_FALSE(prompt.ok());
  EXPECT_EQ(ErrorParam(prompt.status()), "messages");
}

}  // namespace
}  // namespace switchyard::api
