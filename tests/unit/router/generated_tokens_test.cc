// GeneratedTokens: a stream's completion chunks count one token each, a usage object's
// completion_tokens replaces the estimate, and nothing else counts.
#include "router/internal/generated_tokens.h"

#include "gtest/gtest.h"

namespace switchyard::router::internal {
namespace {

TEST(GeneratedTokensTest, EachCompletionChunkIsOneToken) {
  GeneratedTokens tokens;
  EXPECT_EQ(tokens.FeedEvents("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
                              "data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n"),
            2);
  EXPECT_EQ(tokens.FeedEvents("data:{\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n"), 1);
  EXPECT_EQ(tokens.count(), 3);
  // vLLM's role announcement is no token; our engine's role with content is one.
  EXPECT_EQ(tokens.FeedEvents(
                R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"
                "\n\n"),
            0);
  EXPECT_EQ(tokens.FeedEvents(
                R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":" pr"}}]})"
                "\n\n"),
            1);
}

TEST(GeneratedTokensTest, DoneErrorsCommentsAndPayloadTextDoNotCount) {
  GeneratedTokens tokens;
  EXPECT_EQ(tokens.FeedEvents(": keep-alive\n\n"
                              "data: {\"error\":{\"message\":\"boom\"}}\n\n"
                              "data: [DONE]\n\n"),
            0);
  // "data:" inside a chunk's text is not a field.
  EXPECT_EQ(tokens.FeedEvents("data: {\"choices\":[{\"text\":\"x data: {\\\"choices\\\"\"}]}\n\n"),
            1);
}

TEST(GeneratedTokensTest, AUsageObjectIsTheExactCount) {
  GeneratedTokens tokens;
  EXPECT_EQ(tokens.FeedEvents("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
                              "data: {\"choices\":[{\"text\":\"bc\"}]}\n\n"),
            2);
  // include_usage's last chunk: no choices, the exact total (here one more than counted).
  EXPECT_EQ(tokens.FeedEvents("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,"
                              "\"completion_tokens\":3}}\n\n"),
            1);
  EXPECT_EQ(tokens.count(), 3);
  // A correction may be downward.
  GeneratedTokens over;
  over.FeedEvents(
      "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"\","
      "\"finish_reason\":\"stop\"}]}\n\n");
  EXPECT_EQ(over.FeedEvents("data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\n"), -1);
  // A null usage (continuous stats off) counts the chunk.
  GeneratedTokens null_usage;
  EXPECT_EQ(null_usage.FeedEvents("data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"), 1);
}

TEST(GeneratedTokensTest, AWholeBodyCountsOnlyThroughItsUsage) {
  GeneratedTokens tokens;
  EXPECT_EQ(tokens.FeedBody(R"({"choices":[{"text":"a b"}],"usage":{"completion_tokens":2}})"), 2);
  GeneratedTokens no_usage;
  EXPECT_EQ(no_usage.FeedBody(R"({"choices":[{"text":"a b"}]})"), 0);
  GeneratedTokens garbage;
  EXPECT_EQ(garbage.FeedBody(R"({"usage":{"completion_tokens":-4}})"), 0);
  EXPECT_EQ(garbage.FeedBody("not json \"usage\""), 0);
}

}  // namespace
}  // namespace switchyard::router::internal
