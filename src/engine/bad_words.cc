#include "engine/bad_words.h"

#include <algorithm>
#include <string_view>

#include "absl/status/status.h"

#include "base/status_macros.h"

namespace switchyard::engine {

absl::StatusOr<std::vector<std::vector<int32_t>>> TokenizeBadWords(
    const text::Tokenizer& tokenizer, std::span<const std::string> words) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& word : words) {
    std::string_view trimmed = word;
    trimmed.remove_prefix(std::min(trimmed.find_first_not_of(" \t\n\r\f\v"), trimmed.size()));
    if (trimmed.empty())
      return absl::InvalidArgumentError("bad_words entries must not be empty or only whitespace.");
    SY_ASSIGN_OR_RETURN(std::vector<int32_t> plain,
                        tokenizer.Encode(trimmed, /*add_special_tokens=*/false));
    if (plain.empty())
      return absl::InvalidArgumentError("bad_words entries must encode to at least one token.");
    SY_ASSIGN_OR_RETURN(std::vector<int32_t> spaced,
                        tokenizer.Encode(" " + std::string(trimmed), /*add_special_tokens=*/false));
    const bool keep_spaced =
        !spaced.empty() && spaced.front() != plain.front() && spaced.size() == plain.size();
    out.push_back(std::move(plain));
    if (keep_spaced)
      out.push_back(std::move(spaced));
  }
  return out;
}

void AppendBadWordBans(std::span<const std::vector<int32_t>> bad_words,
                       std::span<const int32_t> output, std::vector<int32_t>* banned) {
  for (const std::vector<int32_t>& word : bad_words) {
    if (word.empty() || word.size() - 1 > output.size())
      continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.end() - 1,
                   output.end() - static_cast<std::ptrdiff_t>(prefix)))
      banned->push_back(word.back());
  }
}

}  // namespace switchyard::engine
