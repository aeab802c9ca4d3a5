// Builds a text::Tokenizer from the tokenizer.ggml.* metadata of a GGUF file (the way
// llama.cpp-converted models carry their vocabulary): "gpt2" models become byte-level BPE,
// "llama" models SentencePiece-style BPE. Stateless functions; callable from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "model/gguf.h"
#include "text/tokenizer.h"

namespace switchyard::model {

// Converts the metadata into a VocabSpec; errors name the file and the key.
absl::StatusOr<text::VocabSpec> VocabSpecFromGguf(const GgufFile& gguf);

absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadTokenizerFromGguf(const GgufFile& gguf);
absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadTokenizerFromGgufFile(const std::string& path);

}  // namespace switchyard::model
