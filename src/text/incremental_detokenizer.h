// IncrementalDetokenizer: turns a stream of generated token ids into text pieces for
// streaming, emitting only completed text. It never emits a split UTF-8 character (text
// ending in U+FFFD is held back until a later token completes it) and keeps the spaces that
// SentencePiece decoders strip at the start of a decode, by decoding a window of earlier
// tokens together with the new ones and emitting only the suffix (the vLLM scheme). Runs of
// byte-fallback tokens (<0xNN>) are held until a non-byte token ends them, because HF's
// ByteFallback decoder turns a whole run into U+FFFDs when any byte of it is invalid.
//
// The concatenation of everything Push and Flush return equals Tokenizer::Decode of all
// pushed ids (tested on random id sequences for byte-level and byte-fallback tokenizers),
// except under spaces_between_special_tokens = false, below.
//
// spaces_between_special_tokens follows vLLM's detokenizer for tokenizer.json tokenizers
// (vllm/v1/engine/detokenizer.py FastIncrementalDetokenizer), which is what vLLM runs for
// such models: HF `tokenizers` never puts spaces around added tokens, so true (the default)
// is plain Decode; false emits an added token that directly follows another added token as
// its bare content, dropping whatever separator the decoder would put before it (a
// tokenizer without a decoder joins every token with " "). HF's slow Python tokenizers,
// which join around added tokens with " " when true, are not what a tokenizer.json model
// runs in vLLM.
//
// Not thread-safe: one instance per sequence, used by one thread at a time. Holds a pointer
// to the tokenizer, which must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace switchyard::text {

class IncrementalDetokenizer {
 public:
  // `prompt_ids` give context only (a few of them shape the first decode); they are never
  // emitted.
  IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special_tokens,
                         std::span<const int32_t> prompt_ids = {},
                         bool spaces_between_special_tokens = true);

  // Adds one generated id and returns the text it completes (often empty).
  std::string Push(int32_t id);

  // Returns whatever is still held back (an incomplete character decodes as U+FFFD). Call
  // once at the end of the stream.
  std::string Flush();

 private:
  // Decode of ids_[begin, end).
  std::string DecodeRange(size_t begin, size_t end) const;

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  bool spaces_between_special_tokens_;
  bool last_added_ = false;  // the last pushed id is an added token (spaces flag false only)
  std::vector<int32_t> ids_;
  size_t prefix_offset_;  // start of the context window
  size_t read_offset_;    // ids before this have been emitted
};

}  // namespace switchyard::text
