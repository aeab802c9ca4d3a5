// Hand-made tokenizer.json documents for the text/ unit tests.
#pragma once

#include <string>
#include <vector>

#include "fmt/format.h"

#include "base/json.h"
#include "text/internal/byte_level.h"

namespace switchyard::text::testing {

// A tokenizer.json with a BPE model over `vocab` (ids in order) and `merges`; the other
// components are raw JSON ("null" for none).
inline std::string BpeJson(const std::vector<std::string>& vocab,
                           const std::vector<std::string>& merges, std::string model_options = "",
                           std::string normalizer = "null", std::string pre_tokenizer = "null",
                           std::string decoder = "null", std::string post_processor = "null",
                           std::string added_tokens = "[]") {
  std::string v;
  for (size_t i = 0; i < vocab.size(); ++i) {
    v += fmt::format("{}{}: {}", i ? ", " : "", base::JsonString(vocab[i]), i);
  }
  std::string m;
  for (size_t i = 0; i < merges.size(); ++i) {
    m += fmt::format("{}{}", i ? ", " : "", base::JsonString(merges[i]));
  }
  return fmt::format(
      R"({{"version": "1.0", "added_tokens": {}, "normalizer": {}, "pre_tokenizer": {},
          "post_processor": {}, "decoder": {},
          "model": {{"type": "BPE", "vocab": {{{}}}, "merges": [{}]{}}}}})",
      added_tokens, normalizer, pre_tokenizer, post_processor, decoder, v, m,
      model_options.empty() ? "" : ", " + model_options);
}

// Every byte as a <0xNN> token.
inline std::vector<std::string> ByteTokens() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b)
    out.push_back(fmt::format("<0x{:02X}>", b));
  return out;
}

// A Llama-2 style (SentencePiece BPE, byte fallback) tokenizer.json.
inline std::string SentencePieceJson() {
  std::vector<std::string> vocab = {"<unk>", "<s>", "</s>"};
  for (const std::string& b : ByteTokens())
    vocab.push_back(b);
  for (const char* t : {"▁",  "h",   "e",   "l",      "o",  "w",  "r",    "d",  "▁h",     "he",
                        "ll", "▁he", "llo", "▁hello", "▁w", "or", "▁wor", "ld", "▁world", "é"}) {
    vocab.push_back(t);
  }
  std::vector<std::string> merges = {"▁ h", "h e", "l l",   "▁h e", "ll o",   "▁he llo",
                                     "▁ w", "o r", "▁w or", "l d",  "▁wor ld"};
  return BpeJson(
      vocab, merges, R"("unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true)",
      R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
          {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})",
      "null",
      R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"},
          "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
          {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})",
      R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
          {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
          "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})",
      R"([{"id": 0, "content": "<unk>", "special": true, "normalized": false},
          {"id": 1, "content": "<s>", "special": true, "normalized": false},
          {"id": 2, "content": "</s>", "special": true, "normalized": false}])");
}

// A GPT-2 style byte-level tokenizer.json: all 256 byte characters plus a few merges, the
// Llama-3 split pattern and two special tokens (ids 300 and 301).
inline std::string ByteLevelJson() {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b)
    vocab.emplace_back(internal::ByteToChars(static_cast<uint8_t>(b)));
  for (const char* t : {"Ġt", "he", "Ġthe", "in", "Ġa", "er", "on", "Ġc", "at", "Ġcat", "ĠĠ"}) {
    vocab.push_back(t);
  }
  std::vector<std::string> merges = {"Ġ t", "h e", "Ġt he", "i n",   "Ġ a", "e r",
                                     "o n", "Ġ c", "a t",   "Ġc at", "Ġ Ġ"};
  std::string pattern = base::JsonString(internal::kLlama3Pattern);
  return BpeJson(
      vocab, merges, R"("ignore_merges": true)", "null",
      fmt::format(R"({{"type": "Sequence", "pretokenizers": [{{"type": "Split", "pattern":
          {{"Regex": {}}}, "behavior": "Isolated", "invert": false}}, {{"type": "ByteLevel",
          "add_prefix_space": false, "trim_offsets": true, "use_regex": false}}]}})",
                  pattern),
      R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})",
      R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true})",
      R"([{"id": 300, "content": "<|begin|>", "special": true, "normalized": false},
          {"id": 301, "content": "<|user|>", "special": false, "normalized": false}])");
}

}  // namespace switchyard::text::testing
