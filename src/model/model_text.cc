#include "model/model_text.h"

#include <string>
#include <string_view>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "model/gguf_tokenizer.h"

namespace switchyard::model {

absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadModelTokenizer(const ModelFiles& files) {
  if (files.gguf() != nullptr)
    return LoadTokenizerFromGguf(*files.gguf());
  if (files.tokenizer_json_path().empty())
    return absl::NotFoundError(fmt::format("{}: no tokenizer.json", files.path()));
  return text::Tokenizer::FromJsonFile(files.tokenizer_json_path());
}

absl::StatusOr<text::ModelChatTemplate> LoadModelChatTemplate(const ModelFiles& files,
                                                              const text::Tokenizer& tokenizer) {
  SY_ASSIGN_OR_RETURN(text::ModelChatTemplate tmpl, FindModelChatTemplate(files));
  if (files.gguf() == nullptr)
    return tmpl;
  if (tokenizer.bos_id().has_value())
    tmpl.bos_token = std::string(tokenizer.IdToToken(*tokenizer.bos_id()));
  if (tokenizer.eos_id().has_value())
    tmpl.eos_token = std::string(tokenizer.IdToToken(*tokenizer.eos_id()));
  return tmpl;
}

absl::StatusOr<text::ModelChatTemplate> FindModelChatTemplate(const ModelFiles& files) {
  if (files.gguf() == nullptr)
    return text::LoadModelChatTemplate(files.path());
  text::ModelChatTemplate tmpl;
  SY_ASSIGN_OR_RETURN(std::string_view source, files.gguf()->GetString("tokenizer.chat_template"));
  tmpl.source = std::string(source);
  tmpl.origin = files.path();
  return tmpl;
}

}  // namespace switchyard::model
