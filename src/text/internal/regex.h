// A compiled PCRE2 pattern (UTF + UCP, JIT when available) with Oniguruma-compatible
// whitespace classes, for the regexes in tokenizer.json (which HF runs with Oniguruma).
// The split patterns of the GPT-2, Llama-3 and Qwen2 families run on hand-written matchers
// (text/internal/split_matcher.h) with the same results. Immutable after Compile; FindAll
// may be called from any thread (match data and the JIT stack are per call / per thread).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "text/internal/byte_ranges.h"
#include "text/internal/split_matcher.h"

struct pcre2_real_code_8;
struct pcre2_real_match_context_8;

namespace switchyard::text::internal {

class Regex {
 public:
  enum class Engine {
    kAuto,   // a hand-written matcher for known patterns, PCRE2 otherwise
    kPcre2,  // always PCRE2 (tests compare the two)
  };
  // `pattern` uses Oniguruma/PCRE syntax. Errors name the pattern and position.
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern,
                                                        Engine engine = Engine::kAuto);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of successive non-overlapping matches in `s`
  // (valid UTF-8). After an empty match the search resumes one character later.
  absl::Status FindAll(std::string_view s, ByteRanges* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  std::optional<KnownSplitPattern> known_;
  pcre2_real_code_8* code_ = nullptr;
  pcre2_real_match_context_8* match_context_ = nullptr;
};

// Rewrites the classes whose PCRE2 data differs from HF `tokenizers`' regex engine, so that
// PCRE2 matches as HF does. Exposed for tests.
//  - \s and \S (outside and inside classes) become explicit White_Space classes, since
//    PCRE2's UCP \s omits U+0085 and differs from Oniguruma elsewhere;
//  - \p{X}, \pX, \P{X} and classes holding them, for a general category or major class,
//    gain the code points Unicode 15.0-16.0 assigned to it (PCRE2 10.42 has 14.0's data, HF
//    16.0's); a class holding a \P keeps 14.0's, since PCRE2 cannot subtract inside one.
std::string RewriteUnicodeClasses(std::string_view pattern);

}  // namespace switchyard::text::internal
