// reliability.md section 4B as a table: each bad body maps to an HTTP status, an error type and
// the offending param (empty: null). Every error body must also be valid JSON of vLLM's shape.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simdjson.h"

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/error.h"
#include "api/response_writer.h"

namespace switchyard::api {
namespace {

enum class Endpoint { kCompletion, kChat, kTokenize, kDetokenize };

struct Case {
  std::string name;
  Endpoint endpoint;
  std::string body;
  int http_status;
  std::string type;
  std::string param;
};

constexpr char kMsgs[] = R"("messages":[{"role":"user","content":"hi"}])";

std::string Chat(const std::string& extra) {
  return std::string("{") + kMsgs + "," + extra + "}";
}
std::string Cmpl(const std::string& extra) {
  return R"({"prompt":"hi",)" + extra + "}";
}

// `count` JSON strings "s", comma-separated.
std::string Strings(int count) {
  std::string s;
  for (int i = 0; i < count; ++i)
    s += i == 0 ? "\"s\"" : ",\"s\"";
  return s;
}

std::vector<Case> Cases() {
  using E = Endpoint;
  const std::string bad = "BadRequestError";
  return {
      // B1 malformed JSON.
      {"truncated", E::kChat, R"({"messages":[)", 400, bad, ""},
      {"trailing_garbage", E::kCompletion, R"({"prompt":"x"} x)", 400, bad, ""},
      {"nan_literal", E::kCompletion, R"({"prompt":"x","temperature":NaN})", 400, bad, ""},
      {"infinity_literal", E::kChat, Chat(R"("temperature":Infinity)"), 400, bad, ""},
      {"empty_body", E::kChat, "", 400, bad, ""},
      {"bom", E::kCompletion, "\xEF\xBB\xBF{\"prompt\":\"x\"}", 400, bad, ""},
      {"root_is_array", E::kCompletion, R"(["prompt"])", 400, bad, ""},
      {"overflowing_float", E::kChat, Chat(R"("temperature":1e999)"), 400, bad, "temperature"},
      // B2 nesting.
      {"deep_nesting", E::kCompletion,
       R"({"prompt":"x","x":)" + std::string(200, '[') + std::string(200, ']') + "}", 400, bad, ""},
      // B3 duplicate keys.
      {"duplicate_key", E::kCompletion, R"({"prompt":"a","prompt":"b"})", 400, bad, ""},
      // B4 wrong types.
      {"max_tokens_string", E::kCompletion, Cmpl(R"("max_tokens":"10")"), 400, bad, "max_tokens"},
      {"messages_object", E::kChat, R"({"messages":{}})", 400, bad, "messages"},
      {"stream_string", E::kChat, Chat(R"("stream":"yes")"), 400, bad, "stream"},
      {"n_fraction", E::kCompletion, Cmpl(R"("n":1.5)"), 400, bad, "n"},
      {"stop_ints", E::kChat, Chat(R"("stop":[1,2])"), 400, bad, "stop"},
      {"temperature_bool", E::kChat, Chat(R"("temperature":true)"), 400, bad, "temperature"},
      {"prompt_object", E::kCompletion, R"({"prompt":{"a":1}})", 400, bad, "prompt"},
      {"prompt_mixed_list", E::kCompletion, R"({"prompt":["a",1]})", 400, bad, "prompt"},
      {"token_id_negative", E::kCompletion, R"({"prompt":[1,-2]})", 400, bad, "prompt"},
      {"content_number", E::kChat, R"({"messages":[{"role":"user","content":5}]})", 400, bad,
       "messages[0].content"},
      {"model_number", E::kChat, Chat(R"("model":7)"), 400, bad, "model"},
      {"logit_bias_list", E::kChat, Chat(R"("logit_bias":[1])"), 400, bad, "logit_bias"},
      {"stream_options_string", E::kChat, Chat(R"("stream":true,"stream_options":"x")"), 400, bad,
       "stream_options"},
      {"tools_object", E::kChat, Chat(R"("tools":{})"), 400, bad, "tools"},
      {"kv_params_string", E::kCompletion, Cmpl(R"("kv_transfer_params":"x")"), 400, bad,
       "kv_transfer_params"},
      // B5 integer extremes.
      {"max_tokens_zero", E::kCompletion, Cmpl(R"("max_tokens":0)"), 400, bad, "max_tokens"},
      {"max_tokens_negative", E::kChat, Chat(R"("max_tokens":-1)"), 400, bad, "max_tokens"},
      {"max_tokens_2_63", E::kCompletion, Cmpl(R"("max_tokens":9223372036854775808)"), 400, bad,
       "max_tokens"},
      {"max_tokens_1e309", E::kCompletion, Cmpl(R"("max_tokens":1e309)"), 400, bad, "max_tokens"},
      {"max_tokens_huge", E::kCompletion, Cmpl(R"("max_tokens":100000000000)"), 400, bad,
       "max_tokens"},
      {"max_completion_tokens_zero", E::kChat, Chat(R"("max_completion_tokens":0)"), 400, bad,
       "max_completion_tokens"},
      {"min_tokens_over_max", E::kChat, Chat(R"("max_tokens":2,"min_tokens":3)"), 400, bad,
       "min_tokens"},
      {"seed_over_int64", E::kChat, Chat(R"("seed":18446744073709551615)"), 400, bad, "seed"},
      {"top_k_minus_two", E::kChat, Chat(R"("top_k":-2)"), 400, bad, "top_k"},
      // B6 floats out of range.
      {"temperature_negative", E::kChat, Chat(R"("temperature":-1)"), 400, bad, "temperature"},
      {"temperature_2_01", E::kChat, Chat(R"("temperature":2.01)"), 400, bad, "temperature"},
      {"top_p_zero", E::kCompletion, Cmpl(R"("top_p":0)"), 400, bad, "top_p"},
      {"top_p_1_5", E::kCompletion, Cmpl(R"("top_p":1.5)"), 400, bad, "top_p"},
      {"min_p_2", E::kChat, Chat(R"("min_p":2)"), 400, bad, "min_p"},
      {"frequency_penalty_100", E::kChat, Chat(R"("frequency_penalty":100)"), 400, bad,
       "frequency_penalty"},
      {"presence_penalty_minus_3", E::kChat, Chat(R"("presence_penalty":-3)"), 400, bad,
       "presence_penalty"},
      {"repetition_penalty_zero", E::kChat, Chat(R"("repetition_penalty":0)"), 400, bad,
       "repetition_penalty"},
      {"logit_bias_1e6", E::kChat, Chat(R"("logit_bias":{"1":1e6})"), 400, bad, "logit_bias"},
      {"logit_bias_bad_key", E::kChat, Chat(R"("logit_bias":{"abc":1})"), 400, bad, "logit_bias"},
      // B7 fan-out.
      {"n_million", E::kCompletion, Cmpl(R"("n":1000000)"), 400, bad, "n"},
      {"n_zero", E::kCompletion, Cmpl(R"("n":0)"), 400, bad, "n"},
      {"best_of_million", E::kCompletion, Cmpl(R"("best_of":1000000)"), 400, bad, "best_of"},
      {"best_of_below_n", E::kCompletion, Cmpl(R"("n":3,"best_of":2)"), 400, bad, "best_of"},
      {"best_of_stream", E::kCompletion, Cmpl(R"("best_of":2,"stream":true)"), 400, bad, "best_of"},
      {"logprobs_million", E::kCompletion, Cmpl(R"("logprobs":1000000)"), 400, bad, "logprobs"},
      {"logprobs_negative", E::kCompletion, Cmpl(R"("logprobs":-1)"), 400, bad, "logprobs"},
      {"top_logprobs_million", E::kChat, Chat(R"("logprobs":true,"top_logprobs":1000000)"), 400,
       bad, "top_logprobs"},
      {"top_logprobs_without_logprobs", E::kChat, Chat(R"("top_logprobs":2)"), 400, bad,
       "top_logprobs"},
      {"prompt_logprobs_21", E::kCompletion, Cmpl(R"("prompt_logprobs":21)"), 400, bad,
       "prompt_logprobs"},
      // vLLM: prompt logprobs are never streamed.
      {"prompt_logprobs_stream", E::kChat, Chat(R"("prompt_logprobs":1,"stream":true)"), 400, bad,
       "prompt_logprobs"},
      {"stop_too_many", E::kChat, Chat(R"("stop":[)" + Strings(65) + "]"), 400, bad, "stop"},
      // B9 empty inputs.
      {"empty_prompt", E::kCompletion, R"({"prompt":""})", 400, bad, "prompt"},
      {"empty_prompt_list", E::kCompletion, R"({"prompt":[]})", 400, bad, "prompt"},
      {"empty_token_list", E::kCompletion, R"({"prompt":[[1],[]]})", 400, bad, "prompt"},
      {"missing_prompt", E::kCompletion, R"({"model":"m"})", 400, bad, "prompt"},
      {"empty_messages", E::kChat, R"({"messages":[]})", 400, bad, "messages"},
      {"missing_messages", E::kChat, R"({"model":"m"})", 400, bad, "messages"},
      {"missing_role", E::kChat, R"({"messages":[{"content":"x"}]})", 400, bad, "messages[0].role"},
      {"unknown_role", E::kChat, R"({"messages":[{"role":"root","content":"x"}]})", 400, bad,
       "messages[0].role"},
      {"missing_content", E::kChat, R"({"messages":[{"role":"user"}]})", 400, bad,
       "messages[0].content"},
      {"image_part", E::kChat,
       R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]})",
       400, bad, "messages[0].content"},
      // Other vLLM rules.
      {"both_generation_flags", E::kChat, Chat(R"("continue_final_message":true)"), 400, bad,
       "continue_final_message"},
      {"stream_options_without_stream", E::kChat, Chat(R"("stream_options":{})"), 400, bad,
       "stream_options"},
      {"suffix", E::kCompletion, Cmpl(R"("suffix":"x")"), 400, bad, "suffix"},
      {"bad_tool_choice", E::kChat, Chat(R"("tool_choice":"sometimes")"), 400, bad, "tool_choice"},
      {"bad_response_format", E::kChat, Chat(R"("response_format":{"type":"yaml"})"), 400, bad,
       "response_format.type"},
      {"json_schema_missing", E::kChat, Chat(R"("response_format":{"type":"json_schema"})"), 400,
       bad, "response_format.json_schema"},
      {"beam_search_too_wide", E::kCompletion, Cmpl(R"("use_beam_search":true,"n":11)"), 400, bad,
       "n"},
      {"beam_search_structured", E::kChat,
       Chat(R"("use_beam_search":true,"response_format":{"type":"json_object"})"), 400, bad,
       "response_format"},
      {"beam_search_bad_length_penalty", E::kCompletion,
       Cmpl(R"("use_beam_search":true,"length_penalty":"long")"), 400, bad, "length_penalty"},
      {"bad_words_too_many", E::kCompletion, Cmpl(R"("bad_words":[)" + Strings(129) + "]"), 400,
       bad, "bad_words"},
      {"bad_words_not_strings", E::kCompletion, Cmpl(R"("bad_words":[1])"), 400, bad, "bad_words"},
      // B10 byte cap.
      {"body_too_large", E::kCompletion, R"({"prompt":")" + std::string(5 << 20, 'a') + R"("})",
       413, "RequestEntityTooLargeError", ""},
      // Tokenize / detokenize.
      {"tokenize_missing_prompt", E::kTokenize, R"({"model":"m"})", 400, bad, "prompt"},
      {"tokenize_prompt_list", E::kTokenize, R"({"prompt":[1]})", 400, bad, "prompt"},
      {"detokenize_missing_tokens", E::kDetokenize, R"({})", 400, bad, "tokens"},
      {"detokenize_strings", E::kDetokenize, R"({"tokens":["a"]})", 400, bad, "tokens"},
      {"detokenize_huge_id", E::kDetokenize, R"({"tokens":[4294967296]})", 400, bad, "tokens"},
  };
}

absl::Status ParseFor(const Case& c) {
  const RequestLimits limits;
  switch (c.endpoint) {
    case Endpoint::kCompletion:
      return ParseCompletionRequest(c.body, limits).status();
    case Endpoint::kChat:
      return ParseChatRequest(c.body, limits).status();
    case Endpoint::kTokenize:
      return ParseTokenizeRequest(c.body, limits).status();
    case Endpoint::kDetokenize:
      return ParseDetokenizeRequest(c.body, limits).status();
  }
  return absl::OkStatus();
}

class BadInputTest : public ::testing::TestWithParam<Case> {};

TEST_P(BadInputTest, MapsToStatusTypeAndParam) {
  const Case& c = GetParam();
  const absl::Status status = ParseFor(c);
  ASSERT_FALSE(status.ok());
  const HttpError http = HttpErrorFor(status);
  EXPECT_EQ(http.http_status, c.http_status) << status;
  EXPECT_EQ(http.type, c.type) << status;
  EXPECT_EQ(ErrorParam(status).value_or(""), c.param) << status;

  const std::string body = ErrorBody(status);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(body).get(root), simdjson::SUCCESS) << body;
  simdjson::dom::object error;
  ASSERT_EQ(root["error"].get(error), simdjson::SUCCESS) << body;
  EXPECT_EQ(int64_t(error["code"]), c.http_status);
  EXPECT_EQ(std::string_view(error["type"]), c.type);
  EXPECT_LT(body.size(), 1024u) << "error bodies must not echo the request";
}

// Numbers that are valid JSON but beyond what the parser holds (an integer past 64 bits, a
// decimal past double's range) are 400s that name the field holding them, at the top or
// nested, for every numeric field of completion and chat requests (issue 18, defect 10).
std::vector<Case> NumberFaultCases() {
  using E = Endpoint;
  const std::string bad = "BadRequestError";
  const std::vector<std::string> big = {"1e309", "-1e309", "18446744073709551616",
                                        "-9223372036854775809", "1234567890123456789012345678901"};
  std::vector<Case> cases;
  const std::vector<std::string> shared = {"max_tokens",
                                           "n",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "min_p",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "repetition_penalty",
                                           "seed",
                                           "min_tokens",
                                           "prompt_logprobs",
                                           "truncate_prompt_tokens",
                                           "priority",
                                           "length_penalty",
                                           "best_of"};
  for (size_t v = 0; v < big.size(); ++v) {
    const std::string& number = big[v];
    const std::string tag = std::to_string(v);
    for (const std::string& field : shared) {
      const std::string value = "\"" + field + "\":" + number;
      cases.push_back({"cmpl_" + field + "_" + tag, E::kCompletion, Cmpl(value), 400, bad, field});
      cases.push_back({"chat_" + field + "_" + tag, E::kChat, Chat(value), 400, bad, field});
    }
    cases.push_back({"cmpl_logprobs_" + tag, E::kCompletion, Cmpl("\"logprobs\":" + number), 400,
                     bad, "logprobs"});
    cases.push_back({"chat_max_completion_tokens_" + tag, E::kChat,
                     Chat("\"max_completion_tokens\":" + number), 400, bad,
                     "max_completion_tokens"});
    cases.push_back({"chat_top_logprobs_" + tag, E::kChat,
                     Chat("\"logprobs\":true,\"top_logprobs\":" + number), 400, bad,
                     "top_logprobs"});
    // Nested: inside an object or an array of the field.
    cases.push_back({"chat_logit_bias_" + tag, E::kChat,
                     Chat("\"logit_bias\":{\"5\":" + number + "}"), 400, bad, "logit_bias"});
    cases.push_back({"cmpl_prompt_tokens_" + tag, E::kCompletion,
                     "{\"prompt\":[[1,2],[3," + number + "]]}", 400, bad, "prompt"});
    cases.push_back({"cmpl_allowed_token_ids_" + tag, E::kCompletion,
                     Cmpl("\"allowed_token_ids\":[1," + number + "]"), 400, bad,
                     "allowed_token_ids"});
    cases.push_back({"chat_stop_token_ids_" + tag, E::kChat,
                     Chat("\"stop_token_ids\":[" + number + "]"), 400, bad, "stop_token_ids"});
    cases.push_back(
        {"chat_response_format_" + tag, E::kChat,
         Chat(
             R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","maximum":)" +
             number + "}}}"),
         400, bad, "response_format"});
    cases.push_back(
        {"chat_message_" + tag, E::kChat,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"x\":[" + number + "]}]}", 400, bad,
         "messages"});
    cases.push_back({"detokenize_tokens_" + tag, E::kDetokenize, "{\"tokens\":[1," + number + "]}",
                     400, bad, "tokens"});
    // A field the request does not read is not echoed (param null), and a number inside a
    // string or a key is no number.
    cases.push_back({"unknown_field_" + tag, E::kChat,
                     Chat("\"1e309\":\"1e309\",\"vendor_x\":{\"k\":" + number + "}"), 400, bad,
                     ""});
  }
  return cases;
}

class NumberFaultTest : public BadInputTest {};

TEST_P(NumberFaultTest, NamesTheField) {
  const Case& c = GetParam();
  const absl::Status status = ParseFor(c);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(HttpErrorFor(status).http_status, 400) << status;
  EXPECT_EQ(ErrorParam(status).value_or(""), c.param) << status;
  EXPECT_EQ(status.message().find("not valid JSON"), std::string_view::npos) << status;
  EXPECT_EQ(status.message().find("vendor_x"), std::string_view::npos) << status;
  if (!c.param.empty()) {
    EXPECT_EQ(status.message().substr(0, c.param.size()), c.param) << status;
  }
}

INSTANTIATE_TEST_SUITE_P(Reliability, NumberFaultTest, ::testing::ValuesIn(NumberFaultCases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return param_info.param.name;
                         });

TEST(NumberFaultTest, ExactMessages) {
  const RequestLimits limits;
  absl::Status status =
      ParseCompletionRequest(R"({"prompt":"x","max_tokens":1e309})", limits).status();
  EXPECT_EQ(status.message(), "max_tokens must be a finite number.");
  status = ParseChatRequest(Chat(R"("seed":18446744073709551616)"), limits).status();
  EXPECT_EQ(status.message(), "seed must be at most 9223372036854775807.");
  // Broken JSON stays a plain parse error, even next to a big number.
  status = ParseChatRequest(Chat(R"("seed":1e309,)"), limits).status();
  EXPECT_FALSE(ErrorParam(status).has_value()) << status;
  status = ParseChatRequest(Chat(R"("seed":01)"), limits).status();
  EXPECT_FALSE(ErrorParam(status).has_value()) << status;
}

INSTANTIATE_TEST_SUITE_P(Reliability, BadInputTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return param_info.param.name;
                         });

TEST(BadInputTableTest, HasAtLeastFortyCases) {
  EXPECT_GE(Cases().size(), 40u);
}

}  // namespace
}  // namespace switchyard::api
