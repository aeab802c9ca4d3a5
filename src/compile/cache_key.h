// The identity of a compiled artefact: a set of named factors (graph digest, bucket shapes,
// dtypes, pass options, compiler path, version and flags, ISA features used, project and
// library versions...) turned into canonical JSON (keys sorted by bytes, no whitespace,
// integers in decimal, strings escaped to ASCII) and hashed with SHA-256.
//
// Factors that do not change what gets built (log levels, hostnames, timestamps, paths under
// HOME or under the cache root) are dropped before hashing, so the same build on a machine
// whose HOME moved hits (vLLM issue #47573 is the anti-example); they are kept apart, under
// their own key, in the factors file written beside each entry for diagnosis.
//
// Values only; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace switchyard::compile {

class KeyFactors;
// A factor's value. Floating point numbers are not factors: their text is not canonical.
using FactorValue = std::variant<std::string, int64_t, bool, std::vector<std::string>,
                                 std::shared_ptr<const KeyFactors>>;

// A JSON object of factors. Setting a name again replaces its value.
class KeyFactors {
 public:
  KeyFactors& Set(std::string name, std::string value);
  KeyFactors& Set(std::string name, const char* value) {
    return Set(std::move(name), std::string(value));
  }
  KeyFactors& Set(std::string name, int64_t value);
  KeyFactors& Set(std::string name, int value) { return Set(std::move(name), int64_t{value}); }
  KeyFactors& Set(std::string name, bool value);
  KeyFactors& Set(std::string name, std::vector<std::string> value);
  KeyFactors& Set(std::string name, KeyFactors value);
  KeyFactors& Set(std::string name, FactorValue value);

  const std::map<std::string, FactorValue, std::less<>>& values() const { return values_; }
  bool empty() const { return values_.empty(); }

  // {"a":1,"b":{"c":"x"}}: sorted keys, no whitespace, non-ASCII as \uXXXX.
  std::string CanonicalJson() const;

 private:
  std::map<std::string, FactorValue, std::less<>> values_;
};

// Which factors are non-semantic: any factor (at any depth) with one of these names, and
// any string factor that is one of these paths or lies under one.
struct NonSemanticFactors {
  std::vector<std::string> names;
  std::vector<std::string> path_roots;

  // The names log_level, hostname, host, timestamp, created_at, and the roots $HOME and
  // `cache_root`.
  static NonSemanticFactors Default(std::string_view cache_root);
};

// A computed key.
struct CacheKey {
  // 64 lower-case hex digits: SHA-256 of semantic.CanonicalJson().
  std::string hex;
  KeyFactors semantic;
  // What the rules dropped, in the same nesting.
  KeyFactors non_semantic;

  // The factors file (cache_key_factors.json):
  // {"key":"<hex>","factors":{...semantic...},"non_semantic":{...}}.
  std::string FactorsJson() const;
};

CacheKey ComputeCacheKey(const KeyFactors& factors, const NonSemanticFactors& rules);

// Lower-case hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// Whether `text` is 64 lower-case hex digits, as a key is.
bool IsCacheKeyHex(std::string_view text);

}  // namespace switchyard::compile
