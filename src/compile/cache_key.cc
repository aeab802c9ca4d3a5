#include "compile/cache_key.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include <openssl/sha.h>

#include "base/json.h"

namespace switchyard::compile {
namespace {

void AppendValue(const FactorValue& value, std::string* out);

void AppendObject(const KeyFactors& factors, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [name, value] : factors.values()) {
    if (!first)
      out->push_back(',');
    first = false;
    base::AppendJsonString(name, /*ensure_ascii=*/true, out);
    out->push_back(':');
    AppendValue(value, out);
  }
  out->push_back('}');
}

void AppendValue(const FactorValue& value, std::string* out) {
  if (const auto* s = std::get_if<std::string>(&value)) {
    base::AppendJsonString(*s, /*ensure_ascii=*/true, out);
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    *out += std::to_string(*i);
  } else if (const auto* b = std::get_if<bool>(&value)) {
    *out += *b ? "true" : "false";
  } else if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    out->push_back('[');
    for (size_t k = 0; k < list->size(); ++k) {
      if (k > 0)
        out->push_back(',');
      base::AppendJsonString((*list)[k], /*ensure_ascii=*/true, out);
    }
    out->push_back(']');
  } else {
    AppendObject(*std::get<std::shared_ptr<const KeyFactors>>(value), out);
  }
}

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

bool UnderRoot(std::string_view path, std::string_view root) {
  if (root.empty() || path.substr(0, root.size()) != root)
    return false;
  return path.size() == root.size() || path[root.size()] == '/' || root == "/";
}

bool IsNonSemantic(std::string_view name, const FactorValue& value,
                   const NonSemanticFactors& rules) {
  if (std::find(rules.names.begin(), rules.names.end(), name) != rules.names.end())
    return true;
  const auto* text = std::get_if<std::string>(&value);
  if (text == nullptr)
    return false;
  return std::any_of(rules.path_roots.begin(), rules.path_roots.end(),
                     [&](const std::string& root) { return UnderRoot(*text, root); });
}

// Splits `factors` into what is hashed and what the rules drop, at every depth.
void Split(const KeyFactors& factors, const NonSemanticFactors& rules, KeyFactors* semantic,
           KeyFactors* non_semantic) {
  for (const auto& [name, value] : factors.values()) {
    if (IsNonSemantic(name, value, rules)) {
      non_semantic->Set(name, value);
      continue;
    }
    if (const auto* nested = std::get_if<std::shared_ptr<const KeyFactors>>(&value)) {
      KeyFactors nested_semantic;
      KeyFactors nested_dropped;
      Split(**nested, rules, &nested_semantic, &nested_dropped);
      semantic->Set(name, std::move(nested_semantic));
      if (!nested_dropped.empty())
        non_semantic->Set(name, std::move(nested_dropped));
      continue;
    }
    semantic->Set(name, value);
  }
}

}  // namespace

KeyFactors& KeyFactors::Set(std::string name, std::string value) {
  values_.insert_or_assign(std::move(name), std::move(value));
  return *this;
}

KeyFactors& KeyFactors::Set(std::string name, int64_t value) {
  values_.insert_or_assign(std::move(name), value);
  return *this;
}

KeyFactors& KeyFactors::Set(std::string name, bool value) {
  values_.insert_or_assign(std::move(name), value);
  return *this;
}

KeyFactors& KeyFactors::Set(std::string name, std::vector<std::string> value) {
  values_.insert_or_assign(std::move(name), std::move(value));
  return *this;
}

KeyFactors& KeyFactors::Set(std::string name, FactorValue value) {
  values_.insert_or_assign(std::move(name), std::move(value));
  return *this;
}

KeyFactors& KeyFactors::Set(std::string name, KeyFactors value) {
  values_.insert_or_assign(std::move(name), std::make_shared<const KeyFactors>(std::move(value)));
  return *this;
}

std::string KeyFactors::CanonicalJson() const {
  std::string out;
  AppendObject(*this, &out);
  return out;
}

NonSemanticFactors NonSemanticFactors::Default(std::string_view cache_root) {
  NonSemanticFactors rules;
  rules.names = {"log_level", "hostname", "host", "timestamp", "created_at"};
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    rules.path_roots.push_back(WithoutTrailingSlashes(home));
  if (!cache_root.empty())
    rules.path_roots.push_back(WithoutTrailingSlashes(std::string(cache_root)));
  return rules;
}

std::string CacheKey::FactorsJson() const {
  std::string out = "{\"key\":";
  base::AppendJsonString(hex, /*ensure_ascii=*/true, &out);
  out += ",\"factors\":";
  out += semantic.CanonicalJson();
  out += ",\"non_semantic\":";
  out += non_semantic.CanonicalJson();
  out += "}";
  return out;
}

CacheKey ComputeCacheKey(const KeyFactors& factors, const NonSemanticFactors& rules) {
  CacheKey key;
  Split(factors, rules, &key.semantic, &key.non_semantic);
  key.hex = Sha256Hex(key.semantic.CanonicalJson());
  return key;
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

bool IsCacheKeyHex(std::string_view text) {
  return text.size() == size_t{2} * SHA256_DIGEST_LENGTH &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace switchyard::compile
