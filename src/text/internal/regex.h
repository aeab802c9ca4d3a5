// A compiled PCRE2 pattern (UTF + UCP, JIT when available) with Oniguruma-compatible
// whitespace classes, for the regexes in tokenizer.json (which HF runs with Oniguruma).
// Immutable after Compile; FindAll may be called from any thread (match data and the JIT
// stack are per call / per thread).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct pcre2_real_code_8;
struct pcre2_real_match_context_8;

namespace switchyard::text::internal {

class Regex {
 public:
  // `pattern` uses Oniguruma/PCRE syntax. Errors name the pattern and position.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of successive non-overlapping matches in `s`
  // (valid UTF-8). After an empty match the search resumes one character later.
  absl::Status FindAll(std::string_view s, std::vector<std::pair<size_t, size_t>>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  pcre2_real_match_context_8* match_context_ = nullptr;
};

// Rewrites \s and \S (outside and inside classes) into explicit White_Space classes, since
// PCRE2's UCP \s omits U+0085 and differs from Oniguruma elsewhere. Exposed for tests.
std::string RewriteWhitespaceClasses(std::string_view pattern);

}  // namespace switchyard::text::internal
