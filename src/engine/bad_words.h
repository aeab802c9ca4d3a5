// vLLM's bad_words: words the output must never contain. Each word becomes one or two token
// sequences (as written, and with a leading space where that spells it differently), and at
// every step the last token of a sequence is banned when the tokens generated so far end with
// the rest of it. As in vLLM, a word split differently by the tokenizer in context (or made
// of tokens that appear inside other words) can still appear in the text.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "text/tokenizer.h"

namespace switchyard::engine {

// The token sequences of `words`, vLLM's way: each word left-trimmed and encoded without
// special tokens; then " " + the word, kept when its first token differs from the plain
// form's and it has as many tokens. InvalidArgument for a word that is empty once trimmed.
absl::StatusOr<std::vector<std::vector<int32_t>>> TokenizeBadWords(
    const text::Tokenizer& tokenizer, std::span<const std::string> words);

// Appends to `banned` the last token of every sequence in `bad_words` whose other tokens
// are the last tokens of `output` (the sequence's generated tokens so far).
void AppendBadWordBans(std::span<const std::vector<int32_t>> bad_words,
                       std::span<const int32_t> output, std::vector<int32_t>* banned);

}  // namespace switchyard::engine
