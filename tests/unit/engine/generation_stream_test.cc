#include "engine/internal/generation_stream.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::engine::internal {
namespace {

// Records what the stream asks of the connection, in call order.
class RecordingResponder : public net::HttpResponder {
 public:
  void Send(int status, std::string_view, std::string body, net::HeaderList) override {
    calls.push_back("send " + std::to_string(status) + " " + body);
  }
  void StartStream(int status, std::string_view content_type, net::HeaderList) override {
    calls.push_back("start " + std::to_string(status) + " " + std::string(content_type));
  }
  bool Write(std::string data) override {
    calls.push_back("write " + data);
    return true;
  }
  void End() override { calls.push_back("end"); }
  void OnClose(std::function<void()>) override {}
  bool closed() const override { return false; }
  size_t pending_write_bytes() const override { return 0; }

  std::vector<std::string> calls;
};

// Byte-level vocabulary: 0 is "a"; 1 and 2 are the two bytes of "é" (C3 A9).
std::unique_ptr<text::Tokenizer> MakeTokenizer() {
  text::VocabSpec spec;
  spec.kind = text::VocabSpec::Kind::kByteLevelBpe;
  spec.tokens = {"a", "\xC3\x83", "\xC2\xA9", "<eos>"};
  spec.token_types = {1, 1, 1, 3};
  spec.eos_id = 3;
  auto tok = text::Tokenizer::FromVocab(spec);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

GenerationStreamOptions StreamingCompletion() {
  GenerationStreamOptions o;
  o.stream = true;
  o.echo_prefix = {""};
  o.prompt_tokens = {3};
  o.header = {"cmpl-1", 1700000000, "tiny"};
  return o;
}

RequestUpdate Update(std::string text, std::vector<int32_t> ids, bool last) {
  RequestUpdate u;
  SequenceUpdate s;
  s.text = std::move(text);
  s.token_ids = std::move(ids);
  if (last)
    s.finish_reason = FinishReason::kLength;
  u.sequences.push_back(std::move(s));
  u.finished = last;
  return u;
}

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The head goes out with the first chunk, on the thread that delivers updates: HttpResponder
// orders calls per thread only, so a head sent earlier from the HTTP thread could arrive
// after chunks sent meanwhile from the engine thread.
TEST(GenerationStreamTest, StreamHeadGoesOutWithTheFirstChunk) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStream stream(StreamingCompletion(), tokenizer.get(), responder);
  EXPECT_TRUE(responder->calls.empty());
  stream.OnUpdate(0, Update("a", {0}, false));
  ASSERT_EQ(responder->calls.size(), 2u);
  EXPECT_EQ(responder->calls[0], "start 200 text/event-stream");
  EXPECT_TRUE(StartsWith(responder->calls[1], "write data: {")) << responder->calls[1];
  EXPECT_NE(responder->calls[1].find(R"("text":"a")"), std::string::npos);
  stream.OnUpdate(0, Update("a", {0}, true));
  ASSERT_EQ(responder->calls.size(), 5u);
  EXPECT_NE(responder->calls[2].find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_EQ(responder->calls[3], "write data: [DONE]\n\n");
  EXPECT_EQ(responder->calls[4], "end");
}

TEST(GenerationStreamTest, EchoFollowsTheHead) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.echo_prefix = {"prompt"};
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  EXPECT_TRUE(responder->calls.empty());
  stream.OnUpdate(0, Update("a", {0}, false));
  ASSERT_EQ(responder->calls.size(), 3u);
  EXPECT_EQ(responder->calls[0], "start 200 text/event-stream");
  EXPECT_NE(responder->calls[1].find(R"("text":"prompt")"), std::string::npos);
  EXPECT_NE(responder->calls[2].find(R"("text":"a")"), std::string::npos);
}

TEST(GenerationStreamTest, FailureBeforeAnyChunkIsAPlainError) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStream stream(StreamingCompletion(), tokenizer.get(), responder);
  stream.Fail(absl::UnavailableError("stopping"));
  ASSERT_EQ(responder->calls.size(), 1u);
  EXPECT_TRUE(StartsWith(responder->calls[0], "send 503 {\"error\":")) << responder->calls[0];
  stream.OnUpdate(0, Update("a", {0}, true));  // ignored
  EXPECT_EQ(responder->calls.size(), 1u);
}

TEST(GenerationStreamTest, FailureMidStreamEndsTheStream) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStream stream(StreamingCompletion(), tokenizer.get(), responder);
  stream.OnUpdate(0, Update("a", {0}, false));
  RequestUpdate failed;
  failed.error = absl::InternalError("step failed");
  failed.finished = true;
  stream.OnUpdate(0, std::move(failed));
  ASSERT_EQ(responder->calls.size(), 5u);
  EXPECT_TRUE(StartsWith(responder->calls[2], "write data: {\"error\":")) << responder->calls[2];
  EXPECT_EQ(responder->calls[3], "write data: [DONE]\n\n");
  EXPECT_EQ(responder->calls[4], "end");
}

// text_offset counts characters, as vLLM's len(): a lone byte token is one U+FFFD.
TEST(GenerationStreamTest, LogprobTextOffsetsCountCharacters) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.stream = false;
  o.logprobs = true;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate u = Update(
      "\xEF\xBF\xBD"
      "a",
      {1, 0}, true);
  u.sequences[0].logprobs = {SampleResult{1, -0.5f, {}}, SampleResult{0, -0.25f, {}}};
  stream.OnUpdate(0, std::move(u));
  ASSERT_EQ(responder->calls.size(), 1u);
  EXPECT_NE(responder->calls[0].find(R"("text_offset":[0,1])"), std::string::npos)
      << responder->calls[0];
}

}  // namespace
}  // namespace switchyard::engine::internal
