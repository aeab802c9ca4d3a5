// Structured-output requests and the cache of their compiled grammars.
//
// StructuredOutputSpec is what a request constrains its output to (a JSON schema, any JSON
// object, one of a list of strings, a regex, a GBNF grammar or a structural tag).
// CompileStructuredOutput turns one into a Grammar. GrammarCache keeps the most recently used
// compiled grammars (bounded LRU keyed by the spec), so a schema that many requests repeat is
// compiled once; the HTTP threads compile through it while validating a request, before anything is
// queued.
//
// GrammarCache is thread-safe; the grammars it returns are immutable and shared.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "structured/grammar.h"

namespace switchyard::structured {

struct StructuredOutputSpec {
  enum class Kind { kJsonSchema, kJsonObject, kChoice, kRegex, kGrammar, kStructuralTag };
  Kind kind = Kind::kJsonObject;
  // kJsonSchema: the schema's JSON text; kRegex: the pattern; kGrammar: GBNF; kStructuralTag:
  // its JSON text (structures and triggers).
  std::string text;
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these
};

// InvalidArgument for an invalid or unsupported schema, regex, grammar or structural tag, or an
// empty choice list.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileStructuredOutput(
    const StructuredOutputSpec& spec);

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 64) : capacity_(capacity) {}

  // The cached grammar for `spec`, compiled (outside the lock) on a miss. Errors are not
  // cached. Any thread.
  absl::StatusOr<std::shared_ptr<const Grammar>> Get(const StructuredOutputSpec& spec);

  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const Grammar>>;

  const size_t capacity_;
  mutable base::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::structured
