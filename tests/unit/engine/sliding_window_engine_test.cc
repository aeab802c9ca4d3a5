// The engine on the real CPU runner with models/tiny-mistral-swa (sliding window 24, blocks
// of 16): a KV cache too small for a prompt and its greedy continuation at full attention,
// but large enough for the window and one step, serves both reference prompts at once, and
// every greedy token equals transformers' (tests/data/reference/tiny-mistral-swa.json), as
// it does from a large cache and from a window-aware prefix hit.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "base/json.h"
#include "base/mutex.h"
#include "engine/engine_core.h"
#include "engine/llama_runner.h"
#include "model/model_files.h"
#include "model/model_text.h"

namespace switchyard::engine {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kStepTokens = 16;
constexpr int64_t kMaxModelLen = 2048;

struct ReferencePrompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> greedy;
};

std::vector<int32_t> IntArray(simdjson::dom::element e) {
  std::vector<int32_t> out;
  simdjson::dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) {
    ADD_FAILURE() << "not an array";
    return out;
  }
  for (simdjson::dom::element v : array) {
    int64_t id = 0;
    EXPECT_EQ(v.get_int64().get(id), simdjson::SUCCESS);
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

std::vector<ReferencePrompt> LoadReference() {
  std::vector<ReferencePrompt> prompts;
  auto doc = base::JsonDocument::ParseFile(std::string(SY_SOURCE_DIR) +
                                           "/tests/data/reference/tiny-mistral-swa.json");
  simdjson::dom::array list;
  if (!doc.ok() || (*doc)->root()["prompts"].get_array().get(list) != simdjson::SUCCESS) {
    ADD_FAILURE() << "no reference prompts: " << doc.status();
    return prompts;
  }
  for (simdjson::dom::element p : list) {
    simdjson::dom::element ids;
    simdjson::dom::element greedy;
    if (p["ids"].get(ids) != simdjson::SUCCESS ||
        p["f32_greedy"].get(greedy) != simdjson::SUCCESS) {
      ADD_FAILURE() << "a reference prompt without ids or f32_greedy";
      continue;
    }
    prompts.push_back({IntArray(ids), IntArray(greedy)});
  }
  return prompts;
}

// Collects one request's tokens; Wait returns once the last update arrived.
class TokenCollector {
 public:
  EngineCore::UpdateCallback Callback() {
    return [this](RequestUpdate u) {
      base::MutexLock lock(&mu_);
      for (const SequenceUpdate& s : u.sequences)
        tokens_.insert(tokens_.end(), s.token_ids.begin(), s.token_ids.end());
      cached_ = u.num_cached_tokens;
      error_ = u.error;
      done_ = u.finished;
      cv_.NotifyAll();
    };
  }
  bool Wait() {
    base::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    return cv_.WaitUntil(&mu_, deadline,
                         [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; });
  }
  std::vector<int32_t> tokens() {
    base::MutexLock lock(&mu_);
    return tokens_;
  }
  int64_t cached() {
    base::MutexLock lock(&mu_);
    return cached_;
  }
  absl::Status error() {
    base::MutexLock lock(&mu_);
    return error_;
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  std::vector<int32_t> tokens_ ABSL_GUARDED_BY(mu_);
  int64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class SlidingWindowEngineTest : public ::testing::Test {
 protected:
  void Start(int32_t num_blocks) {
    auto files = model::ModelFiles::Open(std::string(SY_SOURCE_DIR) + "/models/tiny-mistral-swa");
    ASSERT_TRUE(files.ok()) << files.status();
    auto tokenizer = model::LoadModelTokenizer(**files);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    LlamaRunnerOptions runner_options;
    runner_options.num_threads = 2;
    runner_options.max_num_batched_tokens = kStepTokens;
    runner_options.max_logit_rows = 4;
    runner_options.block_size = kBlockSize;
    runner_options.num_kv_blocks = num_blocks;
    auto runner = LlamaRunner::Create(std::move(*files), runner_options);
    ASSERT_TRUE(runner.ok()) << runner.status();
    ASSERT_EQ((*runner)->limits().sliding_window, 24);
    EngineCoreOptions options;
    options.budget.max_num_seqs = 4;
    options.budget.max_num_batched_tokens = kStepTokens;
    options.max_model_len = kMaxModelLen;
    auto core = EngineCore::Start(options, std::move(*runner), tokenizer_.get());
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }

  absl::Status Submit(const std::string& id, const ReferencePrompt& p, TokenCollector* c) {
    EngineRequest r;
    r.request_id = id;
    r.prompt_tokens = p.ids;
    r.stop.max_tokens = static_cast<int64_t>(p.greedy.size());
    r.stop.ignore_eos = true;
    r.sampling.temperature = 0;
    return core_->Submit(std::move(r), c->Callback());
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<EngineCore> core_;
};

TEST_F(SlidingWindowEngineTest, SmallCacheServesLongGenerationsLikeTransformers) {
  const std::vector<ReferencePrompt> prompts = LoadReference();
  ASSERT_EQ(prompts.size(), 2u);
  // Each needs 10 blocks at full attention; 5 hold the window (24) and one 16-token step.
  constexpr int32_t kSmall = 5;
  for (const ReferencePrompt& p : prompts) {
    const auto length = static_cast<int64_t>(p.ids.size() + p.greedy.size());
    ASSERT_GT((length + kBlockSize - 1) / kBlockSize, kSmall);
  }
  ASSERT_LE(MaxBlocksPerSequence(kMaxModelLen, kStepTokens, 24, kBlockSize), kSmall);
  Start(kSmall);
  ASSERT_NE(core_, nullptr);
  std::vector<TokenCollector> collectors(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(Submit("r" + std::to_string(i), prompts[i], &collectors[i]).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(collectors[i].Wait()) << i;
    EXPECT_TRUE(collectors[i].error().ok()) << collectors[i].error();
    EXPECT_EQ(collectors[i].tokens(), prompts[i].greedy) << "prompt " << i;
  }
  EXPECT_EQ(core_->snapshot().num_free_blocks, kSmall);
}

TEST_F(SlidingWindowEngineTest, LargeCacheAndWindowPrefixHitMatchTransformers) {
  const std::vector<ReferencePrompt> prompts = LoadReference();
  ASSERT_EQ(prompts.size(), 2u);
  Start(64);
  ASSERT_NE(core_, nullptr);
  for (size_t i = 0; i < prompts.size(); ++i) {
    // The second run starts from the blocks the first cached: the last full prompt block's
    // window is enough, the blocks before it are never touched.
    for (int run = 0; run < 2; ++run) {
      TokenCollector c;
      ASSERT_TRUE(Submit(fmt::format("r{}-{}", i, run), prompts[i], &c).ok());
      ASSERT_TRUE(c.Wait());
      EXPECT_TRUE(c.error().ok()) << c.error();
      EXPECT_EQ(c.tokens(), prompts[i].greedy) << "prompt " << i << " run " << run;
      const int64_t full_prompt_blocks = (static_cast<int64_t>(prompts[i].ids.size()) - 1) / 16;
      EXPECT_EQ(c.cached(), run == 0 ? 0 : full_prompt_blocks * kBlockSize) << i;
    }
  }
  EXPECT_EQ(core_->snapshot().num_free_blocks, 64);
}

}  // namespace
}  // namespace switchyard::engine
