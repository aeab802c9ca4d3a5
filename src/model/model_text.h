// The text side of a model checkpoint: its tokenizer and its chat template, from an HF
// directory (tokenizer.json, chat_template.jinja / tokenizer_config.json) or from a GGUF
// file's tokenizer.* metadata. Shared by `switchyard generate` and the engine, so both read a
// checkpoint's text setup the same way. (The router reads HF directories only, with text/'s
// loaders: router/ may not use model/, which links runtime/.)
#pragma once

#include <memory>

#include "absl/status/statusor.h"

#include "model/model_files.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace switchyard::model {

// Errors: NotFound when an HF directory has no tokenizer.json; the parsers' errors.
absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadModelTokenizer(const ModelFiles& files);

// The chat template with its special tokens. For GGUF, tokenizer.chat_template with BOS and
// EOS taken from `tokenizer`. NotFound when the checkpoint has none.
absl::StatusOr<text::ModelChatTemplate> LoadModelChatTemplate(const ModelFiles& files,
                                                              const text::Tokenizer& tokenizer);

}  // namespace switchyard::model
