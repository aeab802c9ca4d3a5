// PromptTokenizer over a hand-made tokenizer.json (every printable ASCII character a token,
// one merge, "<s>" added by the post-processor) in a model directory, as the router config's
// `tokenizer:` names it, or built by the caller as `switchyard up` passes it.
#include "router/prompt_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "base/json.h"

namespace switchyard::router {
namespace {

constexpr int32_t kHi = 95;   // the merge of "h" and "i"
constexpr int32_t kBos = 96;  // "<s>"

// Printable ASCII (ids 0..94, from ' '), "hi" and "<s>".
std::string TokenizerJson() {
  std::string vocab;
  for (char c = ' '; c <= '~'; ++c)
    vocab += fmt::format("{}: {}, ", base::JsonString(std::string(1, c)), c - ' ');
  vocab += fmt::format(R"("hi": {}, "<s>": {})", kHi, kBos);
  return fmt::format(
      R"({{"version": "1.0", "normalizer": null, "pre_tokenizer": null, "decoder": null,
          "added_tokens": [{{"id": {0}, "content": "<s>", "special": true, "normalized": false}}],
          "post_processor": {{"type": "TemplateProcessing",
            "single": [{{"SpecialToken": {{"id": "<s>", "type_id": 0}}}},
                       {{"Sequence": {{"id": "A", "type_id": 0}}}}], "pair": [],
            "special_tokens": {{"<s>": {{"id": "<s>", "ids": [{0}], "tokens": ["<s>"]}}}}}},
          "model": {{"type": "BPE", "vocab": {{{1}}}, "merges": ["h i"]}}}})",
      kBos, vocab);
}

// Renders each message as <role>content, then <assistant> when a reply is wanted.
constexpr char kTemplate[] =
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}";

class PromptTokenizerTest : public ::testing::Test {
 protected:
  // A model directory with tokenizer.json and, when `with_template`, kTemplate in
  // tokenizer_config.json.
  std::string ModelDir(bool with_template) {
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) /
        fmt::format("sy_prompt_tokenizer_{}",
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << TokenizerJson();
    if (with_template) {
      std::ofstream(dir / "tokenizer_config.json") << fmt::format(
          R"({{"bos_token": "<s>", "chat_template": {}}})", base::JsonString(kTemplate));
    }
    dirs_.push_back(dir);
    return dir.string();
  }
  void TearDown() override {
    for (const std::filesystem::path& dir : dirs_)
      std::filesystem::remove_all(dir);
  }

  // The tokenizer the config names, which must load.
  static std::unique_ptr<PromptTokenizer> Load(const RouterConfig& config) {
    absl::StatusOr<std::unique_ptr<PromptTokenizer>> t = PromptTokenizer::FromConfig(config);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : nullptr;
  }
  // What `t` reads of `body`, which must tokenize.
  static TokenizedRequest Tokenize(const PromptTokenizer& t, const std::string& body, bool chat) {
    absl::StatusOr<TokenizedRequest> r = t.Tokenize(body, chat);
    EXPECT_TRUE(r.ok()) << r.status() << " " << body;
    return r.ok() ? *std::move(r) : TokenizedRequest{};
  }
  // The ids of `text`, one per character ("hi" merged), after <s> when `bos`.
  static std::vector<int32_t> Ids(std::string_view text, bool bos) {
    std::vector<int32_t> ids;
    if (bos)
      ids.push_back(kBos);
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.substr(i, 3) == "<s>") {
        ids.push_back(kBos);
        i += 2;
      } else if (text.substr(i, 2) == "hi") {
        ids.push_back(kHi);
        ++i;
      } else {
        ids.push_back(text[i] - ' ');
      }
    }
    return ids;
  }

  std::vector<std::filesystem::path> dirs_;
};

TEST_F(PromptTokenizerTest, ACompletionsTextIsEncodedWithTheSpecialTokensItAsksFor) {
  RouterConfig config;
  config.tokenizer = ModelDir(false);
  const std::unique_ptr<PromptTokenizer> t = Load(config);
  ASSERT_NE(t, nullptr);
  TokenizedRequest r =
      Tokenize(*t, R"({"model":"m","prompt":"hi there","stream":true,"cache_salt":"s1"})", false);
  EXPECT_EQ(r.prompt_tokens, Ids("hi there", true));
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.cache_salt, "s1");
  r = Tokenize(*t, R"({"prompt":"hi there","add_special_tokens":false})", false);
  EXPECT_EQ(r.prompt_tokens, Ids("hi there", false));
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.cache_salt, "");
  // A batch is scheduled by its first prompt.
  EXPECT_EQ(Tokenize(*t, R"({"prompt":["hi","zzz"]})", false).prompt_tokens, Ids("hi", true));
}

TEST_F(PromptTokenizerTest, TokenIdsAreTakenAsGivenWithOrWithoutATokenizer) {
  RouterConfig config;
  const std::unique_ptr<PromptTokenizer> none = Load(config);
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(Tokenize(*none, R"({"prompt":[5,6,7]})", false).prompt_tokens,
            (std::vector<int32_t>{5, 6, 7}));
  // Without a tokenizer text has no tokens, and neither does a chat; the fields routing uses
  // are still read.
  EXPECT_TRUE(Tokenize(*none, R"({"prompt":"hi"})", false).prompt_tokens.empty());
  const TokenizedRequest chat = Tokenize(
      *none, R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"cache_salt":"c"})",
      true);
  EXPECT_TRUE(chat.prompt_tokens.empty());
  EXPECT_TRUE(chat.stream);
  EXPECT_EQ(chat.cache_salt, "c");
  config.tokenizer = ModelDir(false);
  const std::unique_ptr<PromptTokenizer> t = Load(config);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Tokenize(*t, R"({"prompt":[5,6,7]})", false).prompt_tokens,
            (std::vector<int32_t>{5, 6, 7}));
}

TEST_F(PromptTokenizerTest, AChatIsRenderedThroughTheModelsTemplateOrItsOwn) {
  RouterConfig config;
  config.tokenizer = ModelDir(true);
  const std::unique_ptr<PromptTokenizer> t = Load(config);
  ASSERT_NE(t, nullptr);
  constexpr char kMessages[] =
      R"("messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])";
  // The checkpoint's bos_token renders as text, which encodes to the special token; no
  // special tokens are added on top unless the request asks.
  EXPECT_EQ(Tokenize(*t, fmt::format("{{{}}}", kMessages), true).prompt_tokens,
            Ids("<s><system>be brief<user>hi<assistant>", false));
  EXPECT_EQ(Tokenize(*t, fmt::format(R"({{{},"add_special_tokens":true}})", kMessages), true)
                .prompt_tokens,
            Ids("<s><system>be brief<user>hi<assistant>", true));
  EXPECT_EQ(Tokenize(*t, fmt::format(R"({{{},"add_generation_prompt":false}})", kMessages), true)
                .prompt_tokens,
            Ids("<s><system>be brief<user>hi", false));
  // A request's own template comes first.
  EXPECT_EQ(
      Tokenize(
          *t, fmt::format(R"({{{},"chat_template":"[{{{{ messages[1].content }}}}]"}})", kMessages),
          true)
          .prompt_tokens,
      Ids("[hi]", false));
}

TEST_F(PromptTokenizerTest, WithoutAModelTemplateAChatMustBringItsOwn) {
  RouterConfig config;
  config.tokenizer = ModelDir(false);
  const std::unique_ptr<PromptTokenizer> t = Load(config);
  ASSERT_NE(t, nullptr);
  const absl::StatusOr<TokenizedRequest> r =
      t->Tokenize(R"({"messages":[{"role":"user","content":"hi"}]})", true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(Tokenize(*t,
                     R"({"messages":[{"role":"user","content":"hi"}],)"
                     R"("chat_template":"{{ messages[0].content }}!"})",
                     true)
                .prompt_tokens,
            Ids("hi!", false));
}

TEST_F(PromptTokenizerTest, ABuiltTokenizerComesBeforeTheDirectory) {
  absl::StatusOr<std::unique_ptr<text::Tokenizer>> built =
      text::Tokenizer::FromJson(TokenizerJson(), "built");
  ASSERT_TRUE(built.ok()) << built.status();
  RouterConfig config;
  config.built_tokenizer = *std::move(built);
  text::ModelChatTemplate built_template;
  built_template.source = "({{ messages[0].content }})";
  config.built_chat_template = built_template;
  config.tokenizer = "/nonexistent/model";  // not read
  const std::unique_ptr<PromptTokenizer> t = Load(config);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Tokenize(*t, R"({"messages":[{"role":"user","content":"hi"}]})", true).prompt_tokens,
            Ids("(hi)", false));
  // A directory without a template of its own keeps the built one.
  RouterConfig from_dir;
  from_dir.tokenizer = ModelDir(false);
  from_dir.built_chat_template = config.built_chat_template;
  const std::unique_ptr<PromptTokenizer> d = Load(from_dir);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(Tokenize(*d, R"({"messages":[{"role":"user","content":"hi"}]})", true).prompt_tokens,
            Ids("(hi)", false));
}

TEST_F(PromptTokenizerTest, ErrorsAreTheLoadersAndTheParsers) {
  RouterConfig config;
  config.tokenizer = "/nonexistent/model";
  EXPECT_FALSE(PromptTokenizer::FromConfig(config).ok());
  config.tokenizer = ModelDir(false);
  const std::unique_ptr<PromptTokenizer> t = Load(config);
  ASSERT_NE(t, nullptr);
  for (const auto& [body, chat] : std::vector<std::pair<std::string, bool>>{
           {"{not json", false}, {"{not json", true}, {R"({"prompt":"x","stream":3})", false}}) {
    const absl::StatusOr<TokenizedRequest> r = t->Tokenize(body, chat);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
}

}  // namespace
}  // namespace switchyard::router
