#include "structured/grammar_cache.h"

#include "absl/status/status.h"
#include "fmt/format.h"

#include "structured/gbnf_grammar.h"
#include "structured/json_schema_grammar.h"
#include "structured/regex_grammar.h"
#include "structured/structural_tag_grammar.h"

namespace switchyard::structured {
namespace {

// Specs longer than this are compiled every time rather than pinned in the cache.
constexpr size_t kMaxCachedKeyBytes = 64 << 10;

std::string CacheKey(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::kJsonSchema:
      return "s" + spec.text;
    case StructuredOutputSpec::Kind::kJsonObject:
      return "o";
    case StructuredOutputSpec::Kind::kRegex:
      return "r" + spec.text;
    case StructuredOutputSpec::Kind::kGrammar:
      return "g" + spec.text;
    case StructuredOutputSpec::Kind::kStructuralTag:
      return "t" + spec.text;
    case StructuredOutputSpec::Kind::kChoice:
      break;
  }
  std::string key = "c";
  for (const std::string& choice : spec.choices)
    key += fmt::format("{}:{}", choice.size(), choice);
  return key;
}

absl::StatusOr<std::shared_ptr<const Grammar>> ChoiceGrammar(
    const std::vector<std::string>& choices) {
  if (choices.empty())
    return absl::InvalidArgumentError("choice must list at least one string");
  size_t bytes = 0;
  for (const std::string& choice : choices)
    bytes += choice.size();
  if (bytes > static_cast<size_t>(GrammarBuilder::kMaxStates))
    return absl::InvalidArgumentError("the choices are too long");
  GrammarBuilder b;
  const int32_t root = b.NewRule();
  const int32_t end = b.NewState();
  b.SetFinal(end);
  for (const std::string& choice : choices)
    b.AddLiteral(b.RuleStart(root), choice, end);
  return b.Build(root);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileStructuredOutput(
    const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::kJsonSchema:
      return CompileJsonSchema(spec.text);
    case StructuredOutputSpec::Kind::kJsonObject:
      return JsonObjectGrammar();
    case StructuredOutputSpec::Kind::kRegex:
      return CompileRegex(spec.text);
    case StructuredOutputSpec::Kind::kGrammar:
      return CompileGbnf(spec.text);
    case StructuredOutputSpec::Kind::kStructuralTag:
      return CompileStructuralTag(spec.text);
    case StructuredOutputSpec::Kind::kChoice:
      break;
  }
  return ChoiceGrammar(spec.choices);
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarCache::Get(const StructuredOutputSpec& spec) {
  std::string key = CacheKey(spec);
  const bool cacheable = key.size() <= kMaxCachedKeyBytes && capacity_ > 0;
  if (cacheable) {
    base::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = CompileStructuredOutput(spec);
  if (!grammar.ok() || !cacheable)
    return grammar;
  base::MutexLock lock(&mu_);
  if (index_.contains(key))
    return grammar;  // another thread compiled it meanwhile
  lru_.emplace_front(key, *grammar);
  index_.emplace(std::move(key), lru_.begin());
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return grammar;
}

size_t GrammarCache::size() const {
  base::MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace switchyard::structured
