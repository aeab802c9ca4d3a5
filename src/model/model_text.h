// The text side of a model checkpoint: its tokenizer and its chat template, from an HF
// directory (tokenizer.json, chat_template.jinja / chat_template.json / tokenizer_config.json)
// or from a GGUF file's tokenizer.* metadata. Shared by `switchyard generate`, `model inspect`
// and the engine, so all read a checkpoint's text setup the same way. (The router reads HF
// directories only, with text/'s loaders: router/ may not use model/, which links runtime/.)
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

// The same template from the same file, for a caller without a tokenizer (`model inspect`):
// a GGUF file's BOS and EOS tokens, which come from its vocabulary, are left empty.
absl::StatusOr<text::ModelChatTemplate> FindModelChatTemplate(const ModelFiles& files);

}  // namespace switchyard::model
