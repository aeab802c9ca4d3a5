#include "engine/internal/generation_stream.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

namespace switchyard::engine::internal {
namespace {

// Records what the stream asks of the connection, in call order.
class RecordingResponder : public net::HttpResponder {
 public:
  void Send(int status, std::string_view, std::string body, net::HeaderList headers) override {
    calls.push_back("send " + std::to_string(status) + " " + body);
    send_headers = std::move(headers);
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
  void OnDrained(size_t, std::function<void()> callback) override { drained = std::move(callback); }

  std::vector<std::string> calls;
  net::HeaderList send_headers;
  std::function<void()> drained;  // as a connection keeps it until the bytes are written
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

// Without Accept (the handler calls it once every request is in the engine), the head goes
// out with the first chunk.
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

// Accepted: the head goes out before any token (issue 18 defect 3), keep-alive beats become
// SSE comments, and the first chunk follows without a second head.
TEST(GenerationStreamTest, AcceptedStreamSendsItsHeadAndKeepAlives) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStream stream(StreamingCompletion(), tokenizer.get(), responder);
  stream.Accept();
  ASSERT_EQ(responder->calls.size(), 1u);
  EXPECT_EQ(responder->calls[0], "start 200 text/event-stream");
  RequestUpdate beat;
  beat.keep_alive = true;
  stream.OnUpdate(0, beat);
  stream.OnUpdate(0, beat);
  ASSERT_EQ(responder->calls.size(), 3u);
  EXPECT_EQ(responder->calls[1], "write : keep-alive\n\n");
  EXPECT_EQ(responder->calls[2], "write : keep-alive\n\n");
  stream.OnUpdate(0, Update("a", {0}, true));
  ASSERT_EQ(responder->calls.size(), 6u);
  EXPECT_TRUE(StartsWith(responder->calls[3], "write data: {")) << responder->calls[3];
  EXPECT_EQ(responder->calls[4], "write data: [DONE]\n\n");
  EXPECT_EQ(responder->calls[5], "end");
}

// A failure after the head (the engine stopping at the end of a drain) is an SSE error event
// and [DONE], never a cut.
TEST(GenerationStreamTest, AcceptedStreamFailsWithAnErrorEvent) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStream stream(StreamingCompletion(), tokenizer.get(), responder);
  stream.Accept();
  RequestUpdate stopped;
  stopped.error = absl::UnavailableError("the engine is stopping");
  stopped.finished = true;
  stream.OnUpdate(0, std::move(stopped));
  ASSERT_EQ(responder->calls.size(), 4u);
  EXPECT_TRUE(StartsWith(responder->calls[1], "write data: {\"error\":")) << responder->calls[1];
  EXPECT_NE(responder->calls[1].find("503"), std::string::npos) << responder->calls[1];
  EXPECT_EQ(responder->calls[2], "write data: [DONE]\n\n");
  EXPECT_EQ(responder->calls[3], "end");
}

// Non-streamed requests keep vLLM's shape: no head before the whole body, beats ignored, and
// a 503 says when to retry.
TEST(GenerationStreamTest, UnstreamedStopIsA503WithRetryAfter) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.stream = false;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  stream.Accept();
  RequestUpdate beat;
  beat.keep_alive = true;
  stream.OnUpdate(0, beat);
  EXPECT_TRUE(responder->calls.empty());
  stream.Fail(absl::UnavailableError("the engine is stopping"));
  ASSERT_EQ(responder->calls.size(), 1u);
  EXPECT_TRUE(StartsWith(responder->calls[0], "send 503 ")) << responder->calls[0];
  bool retry_after = false;
  for (const auto& [name, value] : responder->send_headers)
    retry_after = retry_after || (name == "retry-after" && value == "1");
  EXPECT_TRUE(retry_after);
}

// The drain ticket is held until the responder has written the last byte (here: until it
// lets go of the drained callback), not merely until the answer was handed over.
TEST(GenerationStreamTest, TicketIsHeldUntilTheAnswerIsWritten) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  auto stream =
      std::make_shared<GenerationStream>(StreamingCompletion(), tokenizer.get(), responder);
  auto ticket = std::make_shared<int>(1);
  std::weak_ptr<int> watch = ticket;
  stream->HoldUntilAnswered(std::move(ticket));
  stream->Accept();
  stream->OnUpdate(0, Update("a", {0}, true));
  stream.reset();
  EXPECT_FALSE(watch.expired());
  ASSERT_NE(responder->drained, nullptr);
  responder->drained = nullptr;  // written (or the connection closed): the callback goes
  EXPECT_TRUE(watch.expired());
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

SampleResult PromptLogprob(int32_t token, float logprob, int32_t rank,
                           std::vector<TokenLogprob> top) {
  SampleResult r;
  r.token = token;
  r.logprob = logprob;
  r.rank = rank;
  r.top_logprobs = std::move(top);
  return r;
}

// vLLM's shape: null for the first prompt token, then per position a dict keyed by token id,
// the prompt token first; a prompt token among the top ids keeps its place and their rank.
constexpr std::string_view kPromptLogprobsJson =
    R"("prompt_logprobs":[null,)"
    R"({"0":{"logprob":-0.5,"rank":1,"decoded_token":"a"},)"
    R"("3":{"logprob":-1.0,"rank":2,"decoded_token":"<eos>"}},)"
    R"({"3":{"logprob":-2.0,"rank":4,"decoded_token":"<eos>"},)"
    R"("0":{"logprob":-0.25,"rank":1,"decoded_token":"a"}}])";

// Two updates carry the prompt logprobs as prefill proceeds; every choice of the prompt
// gets them.
TEST(GenerationStreamTest, CompletionChoicesCarryPromptLogprobs) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.stream = false;
  o.n = 2;
  o.prompt_logprobs = true;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate chunk;
  chunk.prompt_logprobs = {PromptLogprob(0, -0.5f, 1, {{0, -0.5f}, {3, -1.0f}})};
  stream.OnUpdate(0, std::move(chunk));
  RequestUpdate last;
  last.prompt_logprobs = {PromptLogprob(3, -2.0f, 4, {{0, -0.25f}})};
  for (int32_t index : {0, 1}) {
    SequenceUpdate s;
    s.index = index;
    s.text = "a";
    s.token_ids = {0};
    s.finish_reason = FinishReason::kLength;
    last.sequences.push_back(std::move(s));
  }
  last.finished = true;
  stream.OnUpdate(0, std::move(last));
  ASSERT_EQ(responder->calls.size(), 1u);
  const std::string& body = responder->calls[0];
  const size_t first = body.find(kPromptLogprobsJson);
  ASSERT_NE(first, std::string::npos) << body;
  EXPECT_NE(body.find(kPromptLogprobsJson, first + 1), std::string::npos) << body;
}

TEST(GenerationStreamTest, ChatCarriesPromptLogprobsAtTheTop) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.stream = false;
  o.chat = true;
  o.prompt_logprobs = true;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate u = Update("a", {0}, true);
  u.prompt_logprobs = {PromptLogprob(0, -0.5f, 1, {{0, -0.5f}, {3, -1.0f}}),
                       PromptLogprob(3, -2.0f, 4, {{0, -0.25f}})};
  stream.OnUpdate(0, std::move(u));
  ASSERT_EQ(responder->calls.size(), 1u);
  const std::string& body = responder->calls[0];
  const size_t at = body.find(std::string(R"(},)") + std::string(kPromptLogprobsJson) + "}");
  EXPECT_NE(at, std::string::npos) << body;
  EXPECT_GT(at, body.find(R"("usage":)")) << body;
}

SampleResult Sampled(int32_t token, float logprob) {
  SampleResult r;
  r.token = token;
  r.logprob = logprob;
  return r;
}

SequenceUpdate Sequence(int32_t index, std::string text, std::vector<SampleResult> sampled) {
  SequenceUpdate s;
  s.index = index;
  s.text = std::move(text);
  for (const SampleResult& r : sampled)
    s.token_ids.push_back(r.token);
  s.logprobs = std::move(sampled);
  s.finish_reason = FinishReason::kLength;
  return s;
}

// best_of 3, n 2: the two sequences with the highest sum of sampled-token logprobs answer,
// best first, as choices 0 and 1; usage counts the tokens of all three.
TEST(GenerationStreamTest, BestOfAnswersTheBestNByCumulativeLogprob) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.stream = false;
  o.n = 2;
  o.best_of = 3;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate u;
  u.sequences.push_back(Sequence(0, "aa", {Sampled(0, -2.0f), Sampled(0, -1.5f)}));      // -3.5
  u.sequences.push_back(Sequence(1, "a", {Sampled(0, -3.0f)}));                          // -3.0
  u.sequences.push_back(Sequence(2, "a<eos>", {Sampled(0, -0.5f), Sampled(3, -1.0f)}));  // -1.5
  u.finished = true;
  stream.OnUpdate(0, std::move(u));
  ASSERT_EQ(responder->calls.size(), 1u);
  const std::string& body = responder->calls[0];
  EXPECT_NE(body.find(R"("choices":[{"index":0,"text":"a<eos>","logprobs":null,)"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"({"index":1,"text":"a","logprobs":null,)"), std::string::npos) << body;
  EXPECT_EQ(body.find(R"("text":"aa")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("completion_tokens":5,)"), std::string::npos) << body;
}

GenerationStreamOptions EchoWithLogprobs(std::string prefix) {
  GenerationStreamOptions o = StreamingCompletion();
  o.logprobs = true;
  o.echo_logprobs = true;
  o.echo_top_logprobs = 1;
  o.echo_prefix = {std::move(prefix)};
  o.first_prompt_token = {0};
  return o;
}

// The prompt "a", "a", "<eos>" echoed with logprobs 1: its tokens come first (the first one
// with null logprob and top entries), then the completion's (its sampled token shown in its top
// entries, as vLLM does), offsets running through both.
constexpr std::string_view kEchoedLogprobsJson =
    R"("logprobs":{"text_offset":[0,1,2,7],"token_logprobs":[null,-0.5,-2.0,-0.25],)"
    R"("tokens":["a","a","<eos>","a"],"top_logprobs":[null,{"a":-0.5,"<eos>":-1.0},)"
    R"({"<eos>":-2.0,"a":-0.25},{"a":-0.25}]})";

TEST(GenerationStreamTest, EchoCarriesThePromptLogprobsFirst) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = EchoWithLogprobs("aa<eos>");
  o.stream = false;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate u;
  u.prompt_logprobs = {PromptLogprob(0, -0.5f, 1, {{0, -0.5f}, {3, -1.0f}}),
                       PromptLogprob(3, -2.0f, 4, {{0, -0.25f}})};
  u.sequences.push_back(Sequence(0, "a", {Sampled(0, -0.25f)}));
  u.finished = true;
  stream.OnUpdate(0, std::move(u));
  ASSERT_EQ(responder->calls.size(), 1u);
  const std::string& body = responder->calls[0];
  EXPECT_NE(body.find(R"("text":"aa<eos>a",)" + std::string(kEchoedLogprobsJson)),
            std::string::npos)
      << body;
}

// max_tokens 0 with echo: the prompt alone answers; the token the engine ran is in usage.
TEST(GenerationStreamTest, EchoOnlyAnswersThePromptAlone) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = EchoWithLogprobs("aa<eos>");
  o.stream = false;
  o.echo_only = true;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate u;
  u.prompt_logprobs = {PromptLogprob(0, -0.5f, 1, {{0, -0.5f}, {3, -1.0f}}),
                       PromptLogprob(3, -2.0f, 4, {{0, -0.25f}})};
  u.sequences.push_back(Sequence(0, "a", {Sampled(0, -0.25f)}));
  u.finished = true;
  stream.OnUpdate(0, std::move(u));
  ASSERT_EQ(responder->calls.size(), 1u);
  const std::string& body = responder->calls[0];
  EXPECT_NE(body.find(R"("text":"aa<eos>","logprobs":{"text_offset":[0,1,2],)"), std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("tokens":["a","a","<eos>"],)"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("finish_reason":"length")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("completion_tokens":1,)"), std::string::npos) << body;
}

// A stream's echo with logprobs waits for all of its prompt logprobs; a sibling sequence's
// tokens that come first are held and follow the echo, offsets continuing from it.
TEST(GenerationStreamTest, StreamedEchoWaitsForThePromptLogprobs) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = EchoWithLogprobs("aa<eos>");
  o.n = 2;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  RequestUpdate early;
  early.prompt_logprobs = {PromptLogprob(0, -0.5f, 1, {{0, -0.5f}, {3, -1.0f}})};
  SequenceUpdate sibling = Sequence(1, "a", {Sampled(0, -0.75f)});
  sibling.finish_reason.reset();
  early.sequences.push_back(std::move(sibling));
  stream.OnUpdate(0, std::move(early));
  ASSERT_EQ(responder->calls.size(), 1u);  // the head alone
  RequestUpdate rest;
  rest.prompt_logprobs = {PromptLogprob(3, -2.0f, 4, {{0, -0.25f}})};
  SequenceUpdate first = Sequence(0, "a", {Sampled(0, -0.25f)});
  first.finish_reason.reset();
  rest.sequences.push_back(std::move(first));
  stream.OnUpdate(0, std::move(rest));
  ASSERT_EQ(responder->calls.size(), 5u);
  const std::string echo =
      R"("logprobs":{"text_offset":[0,1,2],"token_logprobs":[null,-0.5,-2.0],)"
      R"("tokens":["a","a","<eos>"],"top_logprobs":[null,{"a":-0.5,"<eos>":-1.0},)"
      R"({"<eos>":-2.0,"a":-0.25}]})";
  EXPECT_NE(responder->calls[1].find(R"("index":0,"text":"aa<eos>",)" + echo), std::string::npos)
      << responder->calls[1];
  EXPECT_NE(responder->calls[2].find(R"("index":1,"text":"aa<eos>",)" + echo), std::string::npos)
      << responder->calls[2];
  EXPECT_NE(responder->calls[3].find(R"("index":1,"text":"a","logprobs":{"text_offset":[7],)"),
            std::string::npos)
      << responder->calls[3];
  EXPECT_NE(responder->calls[4].find(R"("index":0,"text":"a","logprobs":{"text_offset":[7],)"),
            std::string::npos)
      << responder->calls[4];
}

// stream_options.continuous_usage_stats: every chunk carries the prompt's tokens and the
// choice's completion tokens so far, including a chunk whose text is still held back.
TEST(GenerationStreamTest, ContinuousUsageOnEveryChunk) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.include_usage = true;
  o.continuous_usage = true;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  stream.OnUpdate(0, Update("a", {0}, false));
  stream.OnUpdate(0, Update("", {1}, false));
  stream.OnUpdate(0, Update("\xC3\xA9", {2}, true));
  ASSERT_EQ(responder->calls.size(), 7u);
  auto usage = [](int completion) {
    return fmt::format(R"("usage":{{"prompt_tokens":3,"total_tokens":{},"completion_tokens":{},)"
                       R"("prompt_tokens_details":null}}}})",
                       3 + completion, completion);
  };
  EXPECT_NE(responder->calls[1].find(usage(1)), std::string::npos) << responder->calls[1];
  EXPECT_NE(responder->calls[2].find(R"("text":"")"), std::string::npos) << responder->calls[2];
  EXPECT_NE(responder->calls[2].find(usage(2)), std::string::npos) << responder->calls[2];
  EXPECT_NE(responder->calls[3].find(usage(3)), std::string::npos) << responder->calls[3];
  EXPECT_NE(responder->calls[4].find(R"("choices":[],"usage":{"prompt_tokens":3)"),
            std::string::npos)
      << responder->calls[4];
  EXPECT_EQ(responder->calls[5], "write data: [DONE]\n\n");
}

// Without continuous usage a chat step that only holds text back sends nothing.
TEST(GenerationStreamTest, HeldBackTextSendsNoChunkWithoutContinuousUsage) {
  auto tokenizer = MakeTokenizer();
  auto responder = std::make_shared<RecordingResponder>();
  GenerationStreamOptions o = StreamingCompletion();
  o.chat = true;
  o.include_usage = true;
  GenerationStream stream(std::move(o), tokenizer.get(), responder);
  stream.OnUpdate(0, Update("a", {0}, false));
  stream.OnUpdate(0, Update("", {1}, false));
  ASSERT_EQ(responder->calls.size(), 2u);
  EXPECT_EQ(responder->calls[1].find(R"("usage")"), std::string::npos) << responder->calls[1];
}

}  // namespace
}  // namespace switchyard::engine::internal
