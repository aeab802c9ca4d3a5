#include "engine/engine_core.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "base/mutex.h"

namespace switchyard::engine {
namespace {

// "a".."h" (0..7) and the EOS (8).
constexpr int32_t kVocab = 9;
constexpr int32_t kEos = 8;

std::unique_ptr<text::Tokenizer> MakeTokenizer() {
  text::VocabSpec spec;
  spec.kind = text::VocabSpec::Kind::kByteLevelBpe;
  spec.tokens = {"a", "b", "c", "d", "e", "f", "g", "h", "<eos>"};
  spec.token_types = {1, 1, 1, 1, 1, 1, 1, 1, 3};
  spec.eos_id = kEos;
  auto tok = text::Tokenizer::FromVocab(spec);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

// Greedy picks (token + 1) % 8 after each logit row's token: outputs depend on the last
// token only, so they are the same however requests are batched, cached or preempted.
class FakeRunner final : public ModelRunner {
 public:
  // `prompt_rows`: logit rows beyond the 8 sample rows, for prompt logprobs.
  FakeRunner(int32_t num_blocks, int32_t block_size, int32_t prompt_rows = 0) {
    limits_.vocab_size = kVocab;
    limits_.max_num_batched_tokens = 64;
    limits_.max_logit_rows = 8 + prompt_rows;
    limits_.num_kv_blocks = num_blocks;
    limits_.block_size = block_size;
  }
  const RunnerLimits& limits() const override { return limits_; }
  absl::Status Execute(const model::ForwardBatch& batch, std::span<float> logits) override {
    {
      // Holds the loop inside a step while the test has closed the gate.
      base::MutexLock lock(&gate_->mu);
      gate_->cv.Wait(&gate_->mu, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_->mu) {
        return gate_->open || gate_->steps_allowed > 0;
      });
      if (!gate_->open)
        --gate_->steps_allowed;
    }
    std::fill(logits.begin(), logits.end(), 0.0f);
    for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
      const int32_t token = batch.tokens[static_cast<size_t>(batch.logit_rows[i])];
      logits[i * kVocab + static_cast<size_t>((token + 1) % 8)] = 10.0f;
    }
    tokens_computed_->fetch_add(static_cast<int64_t>(batch.tokens.size()));
    return absl::OkStatus();
  }
  std::string backend_name() const override { return "fake"; }

  struct Gate {
    base::Mutex mu;
    base::CondVar cv;
    bool open ABSL_GUARDED_BY(mu) = true;
    int steps_allowed ABSL_GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<std::atomic<int64_t>> tokens_computed_ =
      std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();

 private:
  RunnerLimits limits_;
};

// Collects a request's updates; Wait returns once the last one arrived.
class Collector {
 public:
  EngineCore::UpdateCallback Callback() {
    return [this](RequestUpdate u) {
      base::MutexLock lock(&mu_);
      if (u.keep_alive) {
        EXPECT_TRUE(u.sequences.empty() && !u.finished && u.error.ok());
        if (texts_.empty())
          ++beats_before_output_;
        ++beats_;
        return;
      }
      if (!u.error.ok())
        error_ = u.error;
      for (SequenceUpdate& s : u.sequences) {
        if (texts_.size() <= static_cast<size_t>(s.index)) {
          texts_.resize(static_cast<size_t>(s.index) + 1);
          reasons_.resize(static_cast<size_t>(s.index) + 1);
        }
        texts_[static_cast<size_t>(s.index)] += s.text;
        if (s.finish_reason.has_value())
          reasons_[static_cast<size_t>(s.index)] = *s.finish_reason;
      }
      cached_ = u.num_cached_tokens;
      if (!u.prompt_logprobs.empty())
        ++prompt_updates_;
      for (SampleResult& lp : u.prompt_logprobs)
        prompt_logprobs_.push_back(std::move(lp));
      ++updates_;
      if (u.finished)
        done_ = true;
      cv_.NotifyAll();
    };
  }
  bool WaitDone() {
    base::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    return cv_.WaitUntil(&mu_, deadline,
                         [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; });
  }
  bool WaitUpdates(int n) {
    base::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    return cv_.WaitUntil(&mu_, deadline,
                         [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return updates_ >= n; });
  }
  std::vector<std::string> texts() {
    base::MutexLock lock(&mu_);
    return texts_;
  }
  std::vector<FinishReason> reasons() {
    base::MutexLock lock(&mu_);
    return reasons_;
  }
  int64_t cached() {
    base::MutexLock lock(&mu_);
    return cached_;
  }
  std::vector<SampleResult> prompt_logprobs() {
    base::MutexLock lock(&mu_);
    return prompt_logprobs_;
  }
  int prompt_updates() {
    base::MutexLock lock(&mu_);
    return prompt_updates_;
  }
  absl::Status error() {
    base::MutexLock lock(&mu_);
    return error_;
  }
  int beats() {
    base::MutexLock lock(&mu_);
    return beats_;
  }
  int beats_before_output() {
    base::MutexLock lock(&mu_);
    return beats_before_output_;
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  std::vector<std::string> texts_ ABSL_GUARDED_BY(mu_);
  std::vector<FinishReason> reasons_ ABSL_GUARDED_BY(mu_);
  int64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<SampleResult> prompt_logprobs_ ABSL_GUARDED_BY(mu_);
  int prompt_updates_ ABSL_GUARDED_BY(mu_) = 0;
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int beats_ ABSL_GUARDED_BY(mu_) = 0;
  int beats_before_output_ ABSL_GUARDED_BY(mu_) = 0;
};

class EngineCoreTest : public ::testing::Test {
 protected:
  void StartCore(int32_t num_blocks = 64, int32_t block_size = 4, int32_t max_num_seqs = 8,
                 int32_t prompt_rows = 0,
                 std::chrono::steady_clock::duration keep_alive_interval = {}) {
    auto runner = std::make_unique<FakeRunner>(num_blocks, block_size, prompt_rows);
    tokens_computed_ = runner->tokens_computed_;
    gate_ = runner->gate_;
    EngineCoreOptions options;
    options.budget.max_num_seqs = max_num_seqs;
    options.budget.max_num_batched_tokens = 64;
    options.max_model_len = std::min(64, num_blocks * block_size);
    options.eos_token_id = kEos;
    options.keep_alive_interval = keep_alive_interval;
    auto core = EngineCore::Start(options, std::move(runner), tokenizer_.get());
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
  }

  EngineRequest Request(std::string id, std::vector<int32_t> prompt, int64_t max_tokens,
                        int32_t n = 1) {
    EngineRequest r;
    r.request_id = std::move(id);
    r.prompt_tokens = std::move(prompt);
    r.stop.max_tokens = max_tokens;
    r.n = n;
    r.sampling.temperature = 0;
    return r;
  }

  std::unique_ptr<text::Tokenizer> tokenizer_ = MakeTokenizer();
  std::shared_ptr<std::atomic<int64_t>> tokens_computed_;
  std::shared_ptr<FakeRunner::Gate> gate_;
  std::unique_ptr<EngineCore> core_;
};

TEST_F(EngineCoreTest, GeneratesUntilMaxTokens) {
  StartCore();
  Collector c;
  ASSERT_TRUE(core_->Submit(Request("r1", {0, 1, 2}, 5), c.Callback()).ok());
  ASSERT_TRUE(c.WaitDone());
  EXPECT_EQ(c.texts(), std::vector<std::string>{"defgh"});
  EXPECT_EQ(c.reasons()[0], FinishReason::kLength);
  EXPECT_EQ(core_->snapshot().num_free_blocks, 64);
}

TEST_F(EngineCoreTest, RejectsInvalidRequests) {
  StartCore();
  Collector c;
  EXPECT_EQ(core_->Submit(Request("e", {}, 5), c.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->Submit(Request("v", {0, 99}, 5), c.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->Submit(Request("l", {0, 1}, 63), c.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->Submit(Request("n", {0}, 5, 0), c.Callback()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineCoreTest, SecondRequestHitsThePrefixCache) {
  StartCore();
  std::vector<int32_t> prompt(21);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>(i % 8);
  Collector first;
  ASSERT_TRUE(core_->Submit(Request("p1", prompt, 2), first.Callback()).ok());
  ASSERT_TRUE(first.WaitDone());
  EXPECT_EQ(first.cached(), 0);
  Collector second;
  ASSERT_TRUE(core_->Submit(Request("p2", prompt, 2), second.Callback()).ok());
  ASSERT_TRUE(second.WaitDone());
  EXPECT_EQ(second.cached(), 20);  // five full blocks of 4; never the last prompt token
  EXPECT_EQ(first.texts(), second.texts());
}

TEST_F(EngineCoreTest, NSequencesShareThePromptBlocks) {
  StartCore();
  std::vector<int32_t> prompt(40, 3);
  Collector c;
  ASSERT_TRUE(core_->Submit(Request("n3", prompt, 1, 3), c.Callback()).ok());
  ASSERT_TRUE(c.WaitDone());
  EXPECT_EQ(c.texts(), (std::vector<std::string>{"e", "e", "e"}));
  // The first sequence computes the prompt; the others only what follows its 9 cached
  // full blocks (36 tokens).
  EXPECT_EQ(tokens_computed_->load(), 40 + 4 + 4);
}

TEST_F(EngineCoreTest, AbortFreesBlocksAndReportsAbort) {
  StartCore();
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = false;
    gate_->steps_allowed = 1;
  }
  Collector c;
  ASSERT_TRUE(core_->Submit(Request("long", {0, 1, 2, 3, 4}, 58), c.Callback()).ok());
  ASSERT_TRUE(c.WaitUpdates(1));
  core_->Abort("long");
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = true;
  }
  gate_->cv.NotifyAll();
  ASSERT_TRUE(c.WaitDone());
  EXPECT_EQ(c.reasons()[0], FinishReason::kAbort);
  EXPECT_EQ(core_->snapshot().num_free_blocks, 64);
  // The id is free again.
  Collector again;
  ASSERT_TRUE(core_->Submit(Request("long", {0}, 1), again.Callback()).ok());
  ASSERT_TRUE(again.WaitDone());
}

TEST_F(EngineCoreTest, PreemptionUnderAFullCacheKeepsOutputs) {
  // 12 blocks of 4 tokens: four sequences of up to 20 tokens cannot all stay resident.
  StartCore(/*num_blocks=*/12, /*block_size=*/4);
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 4; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    ASSERT_TRUE(core_
                    ->Submit(Request("q" + std::to_string(i), {i, i, i, i}, 16),
                             collectors.back()->Callback())
                    .ok());
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(collectors[static_cast<size_t>(i)]->WaitDone());
    std::string want;
    for (int k = 1; k <= 16; ++k)
      want.push_back(static_cast<char>('a' + (i + k) % 8));
    EXPECT_EQ(collectors[static_cast<size_t>(i)]->texts()[0], want) << i;
  }
  EXPECT_EQ(core_->snapshot().num_free_blocks, 12);
}

// Asks for a prefix-cache reset and returns a future of its result.
std::future<absl::Status> Reset(EngineCore& core, bool preempt_running) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = promise->get_future();
  core.ResetPrefixCache(preempt_running,
                        [promise](absl::Status status) { promise->set_value(status); });
  return result;
}

TEST_F(EngineCoreTest, ResetPrefixCacheDropsEveryHit) {
  StartCore();
  std::vector<int32_t> prompt(21, 2);
  Collector first;
  ASSERT_TRUE(core_->Submit(Request("p1", prompt, 2), first.Callback()).ok());
  ASSERT_TRUE(first.WaitDone());
  EXPECT_EQ(Reset(*core_, false).get(), absl::OkStatus());
  Collector second;
  ASSERT_TRUE(core_->Submit(Request("p2", prompt, 2), second.Callback()).ok());
  ASSERT_TRUE(second.WaitDone());
  EXPECT_EQ(second.cached(), 0);
  EXPECT_EQ(first.texts(), second.texts());
}

TEST_F(EngineCoreTest, ResetPrefixCacheWaitsForRunningRequestsUnlessTheyArePreempted) {
  StartCore();
  auto allow_one_step = [this] {
    {
      base::MutexLock lock(&gate_->mu);
      gate_->open = false;
      gate_->steps_allowed = 1;
    }
    gate_->cv.NotifyAll();
  };
  allow_one_step();
  Collector c;
  ASSERT_TRUE(core_->Submit(Request("long", {0, 1, 2, 3, 4}, 40), c.Callback()).ok());
  ASSERT_TRUE(c.WaitUpdates(1));
  // The loop takes the reset after its next step, with the request still running.
  std::future<absl::Status> refused = Reset(*core_, false);
  allow_one_step();
  EXPECT_EQ(refused.get().code(), absl::StatusCode::kFailedPrecondition);
  const int64_t computed_before = tokens_computed_->load();
  std::future<absl::Status> preempting = Reset(*core_, true);
  allow_one_step();
  EXPECT_EQ(preempting.get(), absl::OkStatus());
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = true;
  }
  gate_->cv.NotifyAll();
  ASSERT_TRUE(c.WaitDone());
  std::string want;
  for (int k = 1; k <= 40; ++k)
    want.push_back(static_cast<char>('a' + (4 + k) % 8));
  EXPECT_EQ(c.texts()[0], want);
  EXPECT_EQ(c.reasons()[0], FinishReason::kLength);
  // Preempted with an empty cache, the request computed its tokens again: more than the 37
  // it still had to produce.
  EXPECT_GT(tokens_computed_->load() - computed_before, 37);
  EXPECT_EQ(core_->snapshot().num_free_blocks, 64);
}

TEST_F(EngineCoreTest, ResetPrefixCacheAfterStopIsUnavailable) {
  StartCore();
  core_->Stop();
  EXPECT_EQ(Reset(*core_, false).get().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EngineCoreTest, StopAbortsWhatIsInFlight) {
  StartCore();
  Collector c;
  ASSERT_TRUE(core_->Submit(Request("s", {0}, 60), c.Callback()).ok());
  core_->Stop();
  ASSERT_TRUE(c.WaitDone());
  EXPECT_EQ(core_->Submit(Request("t", {0}, 1), c.Callback()).code(),
            absl::StatusCode::kUnavailable);
}

// Stop ends running and queued requests alike with an Unavailable error (a clean error for
// the client, issue 18 defect 2), and frees their blocks.
TEST_F(EngineCoreTest, StopEndsRunningAndQueuedRequestsWithAnError) {
  StartCore(/*num_blocks=*/64, /*block_size=*/4, /*max_num_seqs=*/1);
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = false;
    gate_->steps_allowed = 1;
  }
  Collector running;
  Collector queued;
  ASSERT_TRUE(core_->Submit(Request("run", {0, 1, 2, 3, 4}, 50), running.Callback()).ok());
  ASSERT_TRUE(running.WaitUpdates(1));
  ASSERT_TRUE(core_->Submit(Request("wait", {1, 2}, 50), queued.Callback()).ok());
  // The loop waits inside its second step. Stop from another thread, and let the step end
  // only once the core refuses new requests (it is stopping): no step may run after it.
  std::thread stopper([this] { core_->Stop(); });
  for (int i = 0;; ++i) {
    const absl::Status probe =
        core_->Submit(Request("probe-" + std::to_string(i), {0}, 1), [](RequestUpdate) {});
    if (absl::IsUnavailable(probe))
      break;
    ASSERT_TRUE(probe.ok()) << probe;
  }
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = true;
  }
  gate_->cv.NotifyAll();
  stopper.join();
  ASSERT_TRUE(running.WaitDone());
  ASSERT_TRUE(queued.WaitDone());
  for (Collector* c : {&running, &queued}) {
    EXPECT_EQ(c->error().code(), absl::StatusCode::kUnavailable) << c->error();
    EXPECT_EQ(c->reasons().back(), FinishReason::kAbort);
  }
  EXPECT_EQ(core_->snapshot().num_free_blocks, 64);
  EXPECT_EQ(core_->snapshot().num_requests, 0);
}

// A queued request gets keep-alive beats before its first token (issue 18 defect 3: a queued
// stream must not look like a dead engine), and they change nothing in its output. With a
// 1 ns interval every sweep beats every request in flight.
TEST_F(EngineCoreTest, QueuedRequestsGetKeepAliveBeats) {
  StartCore(/*num_blocks=*/64, /*block_size=*/4, /*max_num_seqs=*/1, /*prompt_rows=*/0,
            std::chrono::nanoseconds(1));
  Collector running;
  Collector queued;
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = false;
    gate_->steps_allowed = 1;
  }
  ASSERT_TRUE(core_->Submit(Request("run", {0}, 20), running.Callback()).ok());
  ASSERT_TRUE(running.WaitUpdates(1));
  ASSERT_TRUE(core_->Submit(Request("wait", {1}, 3), queued.Callback()).ok());
  {
    base::MutexLock lock(&gate_->mu);
    gate_->open = true;
  }
  gate_->cv.NotifyAll();
  ASSERT_TRUE(running.WaitDone());
  ASSERT_TRUE(queued.WaitDone());
  EXPECT_GT(queued.beats_before_output(), 0);
  EXPECT_EQ(running.texts()[0].size(), 20u);
  EXPECT_EQ(queued.texts()[0].size(), 3u);
}

TEST_F(EngineCoreTest, NoKeepAliveBeatsWithoutAnInterval) {
  StartCore(/*num_blocks=*/64, /*block_size=*/4, /*max_num_seqs=*/1);
  Collector running;
  Collector queued;
  ASSERT_TRUE(core_->Submit(Request("run", {0}, 20), running.Callback()).ok());
  ASSERT_TRUE(core_->Submit(Request("wait", {1}, 3), queued.Callback()).ok());
  ASSERT_TRUE(running.WaitDone());
  ASSERT_TRUE(queued.WaitDone());
  EXPECT_EQ(running.beats() + queued.beats(), 0);
}

// What FakeRunner's logits give prompt token `next` after `token`: logit 10 for
// (token + 1) % 8, 0 for the other 8 ids.
SampleResult ExpectedPromptLogprob(int32_t token, int32_t next) {
  const int32_t favourite = (token + 1) % 8;
  const double log_norm = std::log(std::exp(10.0) + 8.0);
  SampleResult want;
  want.token = next;
  want.logprob = static_cast<float>((next == favourite ? 10.0 : 0.0) - log_norm);
  want.rank = next == favourite ? 1 : kVocab;
  want.top_logprobs = {{favourite, static_cast<float>(10.0 - log_norm)},
                       {favourite == 0 ? 1 : 0, static_cast<float>(-log_norm)}};
  return want;
}

void ExpectPromptLogprobs(const std::vector<SampleResult>& got,
                          const std::vector<int32_t>& prompt) {
  ASSERT_EQ(got.size(), prompt.size() - 1);
  for (size_t k = 0; k < got.size(); ++k) {
    const SampleResult want = ExpectedPromptLogprob(prompt[k], prompt[k + 1]);
    EXPECT_EQ(got[k].token, want.token) << k;
    EXPECT_NEAR(got[k].logprob, want.logprob, 1e-5) << k;
    EXPECT_EQ(got[k].rank, want.rank) << k;
    ASSERT_EQ(got[k].top_logprobs.size(), 2u) << k;
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(got[k].top_logprobs[j].token, want.top_logprobs[j].token) << k;
      EXPECT_NEAR(got[k].top_logprobs[j].logprob, want.top_logprobs[j].logprob, 1e-5) << k;
    }
  }
}

TEST_F(EngineCoreTest, PromptLogprobsArriveChunkByChunk) {
  // Three rows a step for prompt positions: the 9 positions take three steps.
  StartCore(64, 4, 8, /*prompt_rows=*/3);
  const std::vector<int32_t> prompt = {0, 1, 2, 5, 3, 4, 4, 0, 7, 1};
  EngineRequest r = Request("lp", prompt, 2);
  r.prompt_logprobs = 2;
  Collector c;
  ASSERT_TRUE(core_->Submit(std::move(r), c.Callback()).ok());
  ASSERT_TRUE(c.WaitDone());
  ExpectPromptLogprobs(c.prompt_logprobs(), prompt);
  EXPECT_EQ(c.prompt_updates(), 3);
  EXPECT_EQ(c.texts(), std::vector<std::string>{"cd"});
  EXPECT_EQ(tokens_computed_->load(), 10 + 1);
}

TEST_F(EngineCoreTest, PromptLogprobsOncePerRequestAndTopZero) {
  StartCore(64, 4, 8, /*prompt_rows=*/16);
  const std::vector<int32_t> prompt = {3, 3, 4, 6};
  EngineRequest r = Request("n2", prompt, 1, /*n=*/2);
  r.prompt_logprobs = 0;
  Collector c;
  ASSERT_TRUE(core_->Submit(std::move(r), c.Callback()).ok());
  ASSERT_TRUE(c.WaitDone());
  EXPECT_EQ(c.texts(), (std::vector<std::string>{"h", "h"}));
  const std::vector<SampleResult> got = c.prompt_logprobs();
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < got.size(); ++k) {
    const SampleResult want = ExpectedPromptLogprob(prompt[k], prompt[k + 1]);
    EXPECT_EQ(got[k].token, want.token);
    EXPECT_NEAR(got[k].logprob, want.logprob, 1e-5);
    EXPECT_EQ(got[k].rank, want.rank);
    EXPECT_TRUE(got[k].top_logprobs.empty());
  }
}

// As vLLM: a prompt-logprobs request never reads the prefix cache, but its blocks serve
// later requests.
TEST_F(EngineCoreTest, PromptLogprobsSkipPrefixCacheReads) {
  StartCore(64, 4, 8, /*prompt_rows=*/8);
  std::vector<int32_t> prompt(21);
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((3 * i) % 8);
  Collector first;
  ASSERT_TRUE(core_->Submit(Request("c1", prompt, 1), first.Callback()).ok());
  ASSERT_TRUE(first.WaitDone());
  EngineRequest r = Request("c2", prompt, 1);
  r.prompt_logprobs = 2;
  Collector second;
  ASSERT_TRUE(core_->Submit(std::move(r), second.Callback()).ok());
  ASSERT_TRUE(second.WaitDone());
  EXPECT_EQ(second.cached(), 0);
  ExpectPromptLogprobs(second.prompt_logprobs(), prompt);
  Collector third;
  ASSERT_TRUE(core_->Submit(Request("c3", prompt, 1), third.Callback()).ok());
  ASSERT_TRUE(third.WaitDone());
  EXPECT_EQ(third.cached(), 20);
  EXPECT_EQ(first.texts(), second.texts());
  EXPECT_EQ(core_->snapshot().num_free_blocks, 64);
}

TEST_F(EngineCoreTest, PromptLogprobsNeedSpareLogitRows) {
  StartCore();  // logit rows = max_num_seqs: none to spare
  EngineRequest r = Request("x", {0, 1, 2}, 1);
  r.prompt_logprobs = 1;
  Collector c;
  EXPECT_EQ(core_->Submit(std::move(r), c.Callback()).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace switchyard::engine
