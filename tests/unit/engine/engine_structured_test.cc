// Structured output through the engine loop: a runner whose logits always favour 'a' writes
// "aaaa..." unconstrained; with a grammar, the engine masks every step and advances each
// sequence's matcher, so the text is the grammar's and ends with EOS once complete.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "base/mutex.h"
#include "engine/engine_core.h"
#include "structured/grammar_cache.h"
#include "structured/json_schema_grammar.h"

namespace switchyard::engine {
namespace {

// Single-character tokens; '}' before '1' so that greedy ties close objects.
const std::vector<std::string> kTokens = {"a", "}", "1", "{", "\"", ":", ",", "b", "<eos>"};
constexpr int32_t kEos = 8;
constexpr int32_t kVocab = 9;

std::unique_ptr<text::Tokenizer> MakeTokenizer() {
  text::VocabSpec spec;
  spec.kind = text::VocabSpec::Kind::kByteLevelBpe;
  spec.tokens = kTokens;
  spec.token_types = {1, 1, 1, 1, 1, 1, 1, 1, 3};
  spec.eos_id = kEos;
  auto tok = text::Tokenizer::FromVocab(spec);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

class FavourARunner final : public ModelRunner {
 public:
  FavourARunner() {
    limits_.vocab_size = kVocab;
    limits_.max_num_batched_tokens = 64;
    limits_.max_logit_rows = 8;
    limits_.num_kv_blocks = 64;
    limits_.block_size = 4;
  }
  const RunnerLimits& limits() const override { return limits_; }
  absl::Status Execute(const model::ForwardBatch& batch, std::span<float> logits) override {
    std::fill(logits.begin(), logits.end(), 0.0f);
    for (size_t i = 0; i < batch.logit_rows.size(); ++i)
      logits[i * kVocab] = 10.0f;  // 'a'
    return absl::OkStatus();
  }
  std::string backend_name() const override { return "favour-a"; }

 private:
  RunnerLimits limits_;
};

struct Result {
  std::vector<std::string> texts;
  std::vector<FinishReason> reasons;
};

class EngineStructuredTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = MakeTokenizer();
    EngineCoreOptions options;
    options.budget.max_num_seqs = 8;
    options.budget.max_num_batched_tokens = 64;
    options.max_model_len = 64;
    options.eos_token_id = kEos;
    auto core = EngineCore::Start(options, std::make_unique<FavourARunner>(), tokenizer_.get());
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
  }

  Result Run(std::shared_ptr<const structured::Grammar> grammar, int64_t max_tokens, int32_t n = 1,
             int32_t min_tokens = 0, bool ignore_eos = false) {
    EngineRequest r;
    r.request_id = "r" + std::to_string(next_id_++);
    r.prompt_tokens = {0, 7};
    r.n = n;
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    r.stop.min_tokens = min_tokens;
    r.stop.ignore_eos = ignore_eos;
    r.grammar = std::move(grammar);
    base::Mutex mu;
    base::CondVar cv;
    Result result;
    result.texts.resize(static_cast<size_t>(n));
    result.reasons.resize(static_cast<size_t>(n));
    bool done = false;
    absl::Status submitted = core_->Submit(std::move(r), [&](RequestUpdate u) {
      base::MutexLock lock(&mu);
      for (const SequenceUpdate& s : u.sequences) {
        result.texts[static_cast<size_t>(s.index)] += s.text;
        if (s.finish_reason.has_value())
          result.reasons[static_cast<size_t>(s.index)] = *s.finish_reason;
      }
      done = u.finished;
      cv.NotifyAll();
    });
    EXPECT_TRUE(submitted.ok()) << submitted;
    base::MutexLock lock(&mu);
    cv.Wait(&mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done; });
    return result;
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<EngineCore> core_;
  int next_id_ = 0;
};

TEST_F(EngineStructuredTest, UnconstrainedWritesTheFavourite) {
  Result r = Run(nullptr, 5);
  EXPECT_EQ(r.texts[0], "aaaaa");
  EXPECT_EQ(r.reasons[0], FinishReason::kLength);
}

TEST_F(EngineStructuredTest, SchemaShapesTheTextAndEndsIt) {
  auto schema = structured::CompileJsonSchema(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})");
  ASSERT_TRUE(schema.ok()) << schema.status();
  Result r = Run(*schema, 30, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.texts[static_cast<size_t>(i)], R"({"a":1})");
    EXPECT_EQ(r.reasons[static_cast<size_t>(i)], FinishReason::kStop);
  }
}

TEST_F(EngineStructuredTest, ChoiceEndsEvenUnderMinTokens) {
  structured::StructuredOutputSpec spec{
      structured::StructuredOutputSpec::Kind::kChoice, "", {"ab", "1b"}};
  auto choice = structured::CompileStructuredOutput(spec);
  ASSERT_TRUE(choice.ok());
  Result r = Run(*choice, 20, 1, /*min_tokens=*/10);
  EXPECT_EQ(r.texts[0], "ab");
  EXPECT_EQ(r.reasons[0], FinishReason::kStop);
}

TEST_F(EngineStructuredTest, LengthCutAndIgnoredEos) {
  std::shared_ptr<const structured::Grammar> object = structured::JsonObjectGrammar();
  Result cut = Run(object, 1);
  EXPECT_EQ(cut.texts[0], "{");
  EXPECT_EQ(cut.reasons[0], FinishReason::kLength);
  // With ignore_eos a complete value is followed by EOS tokens only (no text) to max_tokens.
  structured::StructuredOutputSpec spec{structured::StructuredOutputSpec::Kind::kChoice, "", {"b"}};
  Result ignored = Run(*structured::CompileStructuredOutput(spec), 6, 1, 0, /*ignore_eos=*/true);
  EXPECT_EQ(ignored.texts[0], "b");
  EXPECT_EQ(ignored.reasons[0], FinishReason::kLength);
}

}  // namespace
}  // namespace switchyard::engine
