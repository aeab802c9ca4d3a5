// Tokenizer::FromJson / FromJsonFile: the tokenizer.json loader.
#include <filesystem>
#include <utility>

#include "fmt/format.h"

#include "base/file.h"
#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "text/internal/tokenizer_impl.h"

namespace switchyard::text {
namespace {

absl::StatusOr<int32_t> ParseId(simdjson::dom::element value, const base::JsonPath& at) {
  int64_t id = 0;
  if (value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id >= (int64_t{1} << 30)) {
    return at.Error("expected a token id (integer in [0, 2^30))");
  }
  return static_cast<int32_t>(id);
}

absl::Status ParseMerges(simdjson::dom::array merges, const base::JsonPath& at,
                         std::vector<std::pair<std::string, std::string>>* out) {
  out->reserve(merges.size());
  size_t i = 0;
  for (simdjson::dom::element merge : merges) {
    base::JsonPath merge_at = at.Index(i++);
    std::string_view text;
    if (merge.get_string().get(text) == simdjson::SUCCESS) {
      size_t space = text.find(' ');
      if (space == std::string_view::npos || text.find(' ', space + 1) != std::string_view::npos) {
        return merge_at.Error(fmt::format("expected \"a b\", got \"{}\"", text));
      }
      out->emplace_back(std::string(text.substr(0, space)), std::string(text.substr(space + 1)));
      continue;
    }
    simdjson::dom::array pair;
    std::string_view a, b;
    if (merge.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
        pair.at(0).get_string().get(a) != simdjson::SUCCESS ||
        pair.at(1).get_string().get(b) != simdjson::SUCCESS) {
      return merge_at.Error("expected \"a b\" or [\"a\", \"b\"]");
    }
    out->emplace_back(std::string(a), std::string(b));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<internal::BpeModel>> ParseModel(simdjson::dom::element root,
                                                               const base::JsonPath& root_at,
                                                               bool byte_level_input) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::element json, base::RequiredField(root, "model", root_at));
  base::JsonPath at = root_at.Child("model");
  SY_ASSIGN_OR_RETURN(std::optional<std::string> type,
                      base::OptionalField<std::string>(json, "type", at));
  if (type && *type != "BPE") {
    return at.Child("type").Error(
        fmt::format("unsupported model type \"{}\" (only BPE is supported)", *type));
  }
  SY_ASSIGN_OR_RETURN(simdjson::dom::element vocab_json, base::RequiredField(json, "vocab", at));
  simdjson::dom::object vocab_object;
  if (vocab_json.get_object().get(vocab_object) != simdjson::SUCCESS) {
    return at.Child("vocab").Error("expected an object of token -> id");
  }
  absl::flat_hash_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_object.size());
  base::JsonPath vocab_at = at.Child("vocab");
  for (auto field : vocab_object) {
    std::string_view key = field.key;
    SY_ASSIGN_OR_RETURN(int32_t id, ParseId(field.value, vocab_at.Child(key)));
    vocab.emplace(std::string(key), id);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> merges_json,
                      base::OptionalField(json, "merges", at));
  if (merges_json) {
    simdjson::dom::array merges_array;
    if (merges_json->get_array().get(merges_array) != simdjson::SUCCESS) {
      return at.Child("merges").Error("expected an array");
    }
    SY_RETURN_IF_ERROR(ParseMerges(merges_array, at.Child("merges"), &merges));
  }
  internal::BpeOptions options;
  SY_ASSIGN_OR_RETURN(std::optional<std::string> unk,
                      base::OptionalField<std::string>(json, "unk_token", at));
  if (unk) {
    auto it = vocab.find(*unk);
    if (it == vocab.end()) {
      return at.Child("unk_token").Error(fmt::format("\"{}\" is not in the vocabulary", *unk));
    }
    options.unk_id = it->second;
  }
  SY_ASSIGN_OR_RETURN(std::optional<std::string> prefix,
                      base::OptionalField<std::string>(json, "continuing_subword_prefix", at));
  SY_ASSIGN_OR_RETURN(std::optional<std::string> suffix,
                      base::OptionalField<std::string>(json, "end_of_word_suffix", at));
  options.continuing_subword_prefix = prefix.value_or("");
  options.end_of_word_suffix = suffix.value_or("");
  SY_ASSIGN_OR_RETURN(options.fuse_unk, base::FieldOr<bool>(json, "fuse_unk", false, at));
  SY_ASSIGN_OR_RETURN(options.byte_fallback, base::FieldOr<bool>(json, "byte_fallback", false, at));
  SY_ASSIGN_OR_RETURN(options.ignore_merges, base::FieldOr<bool>(json, "ignore_merges", false, at));
  options.byte_level_input = byte_level_input;
  return internal::BpeModel::Create(std::move(vocab), merges, std::move(options), root_at.source());
}

absl::StatusOr<std::vector<internal::AddedToken>> ParseAddedTokens(simdjson::dom::element root,
                                                                   const base::JsonPath& root_at) {
  std::vector<internal::AddedToken> tokens;
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> list,
                      base::OptionalField(root, "added_tokens", root_at));
  if (!list)
    return tokens;
  base::JsonPath at = root_at.Child("added_tokens");
  simdjson::dom::array array;
  if (list->get_array().get(array) != simdjson::SUCCESS)
    return at.Error("expected an array");
  size_t i = 0;
  for (simdjson::dom::element item : array) {
    base::JsonPath item_at = at.Index(i++);
    internal::AddedToken token;
    SY_ASSIGN_OR_RETURN(simdjson::dom::element id, base::RequiredField(item, "id", item_at));
    SY_ASSIGN_OR_RETURN(token.id, ParseId(id, item_at.Child("id")));
    SY_ASSIGN_OR_RETURN(token.content, base::RequiredField<std::string>(item, "content", item_at));
    if (token.content.empty())
      return item_at.Child("content").Error("must not be empty");
    SY_ASSIGN_OR_RETURN(token.special, base::FieldOr<bool>(item, "special", false, item_at));
    SY_ASSIGN_OR_RETURN(token.lstrip, base::FieldOr<bool>(item, "lstrip", false, item_at));
    SY_ASSIGN_OR_RETURN(token.rstrip, base::FieldOr<bool>(item, "rstrip", false, item_at));
    SY_ASSIGN_OR_RETURN(token.single_word,
                        base::FieldOr<bool>(item, "single_word", false, item_at));
    SY_ASSIGN_OR_RETURN(token.normalized,
                        base::FieldOr<bool>(item, "normalized", !token.special, item_at));
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// The token text of a tokenizer_config.json entry: a string or {"content": ...}.
std::optional<std::string> ConfigToken(simdjson::dom::element config, std::string_view key) {
  simdjson::dom::element value;
  if (config.at_key(key).get(value) != simdjson::SUCCESS)
    return std::nullopt;
  std::string_view s;
  if (value.get_string().get(s) == simdjson::SUCCESS)
    return std::string(s);
  if (value.at_key("content").get_string().get(s) == simdjson::SUCCESS)
    return std::string(s);
  return std::nullopt;
}

std::optional<int32_t> FirstKnown(const Tokenizer& t,
                                  std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (auto id = t.TokenToId(name))
      return id;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json,
                                                               std::string_view source) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, source));
  simdjson::dom::element root = doc->root();
  const base::JsonPath at(source);
  if (!root.is_object())
    return at.Error("expected a JSON object");

  auto impl = std::make_unique<Impl>();
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> normalizer,
                      base::OptionalField(root, "normalizer", at));
  if (normalizer) {
    SY_ASSIGN_OR_RETURN(impl->normalizer,
                        internal::ParseNormalizer(*normalizer, at.Child("normalizer")));
  }
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> pre,
                      base::OptionalField(root, "pre_tokenizer", at));
  if (pre) {
    SY_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                        internal::ParsePreTokenizer(*pre, at.Child("pre_tokenizer"), true));
  }
  bool byte_level_input = impl->pre_tokenizer && impl->pre_tokenizer->DefersByteMapping();
  SY_ASSIGN_OR_RETURN(impl->model, ParseModel(root, at, byte_level_input));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> post,
                      base::OptionalField(root, "post_processor", at));
  if (post) {
    SY_ASSIGN_OR_RETURN(impl->post_processor,
                        internal::ParsePostProcessor(*post, at.Child("post_processor")));
  }
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> decoder,
                      base::OptionalField(root, "decoder", at));
  if (decoder) {
    SY_ASSIGN_OR_RETURN(impl->decoder, internal::ParseDecoder(*decoder, at.Child("decoder")));
  }
  SY_ASSIGN_OR_RETURN(std::vector<internal::AddedToken> added, ParseAddedTokens(root, at));
  if (absl::Status indexed = impl->IndexTokens(added); !indexed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", source, std::string(indexed.message())));
  }
  Impl* raw = impl.get();
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(std::move(impl)));
  // Without tokenizer_config.json, guess the usual names.
  raw->bos_id = FirstKnown(*tokenizer, {"<|begin_of_text|>", "<s>", "<bos>"});
  raw->eos_id = FirstKnown(*tokenizer, {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>"});
  raw->pad_id = FirstKnown(*tokenizer, {"<pad>", "<|pad|>"});
  raw->unk_id = FirstKnown(*tokenizer, {"<unk>"});
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonFile(const std::string& path) {
  SY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, FromJson(text, path));
  // tokenizer_config.json beside it names the real BOS/EOS/PAD/UNK tokens.
  std::filesystem::path config_path =
      std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(config_path, ec))
    return tokenizer;
  auto config_text = base::ReadFile(config_path.string());
  if (!config_text.ok())
    return tokenizer;
  auto config = base::JsonDocument::Parse(*config_text, config_path.string());
  if (!config.ok())
    return tokenizer;
  Impl& impl = *tokenizer->impl_;
  auto lookup = [&](std::string_view key, std::optional<int32_t>* slot) {
    if (auto name = ConfigToken((*config)->root(), key)) {
      if (auto id = tokenizer->TokenToId(*name))
        *slot = id;
    }
  };
  lookup("bos_token", &impl.bos_id);
  lookup("eos_token", &impl.eos_id);
  lookup("pad_token", &impl.pad_id);
  lookup("unk_token", &impl.unk_id);
  return tokenizer;
}

}  // namespace switchyard::text
