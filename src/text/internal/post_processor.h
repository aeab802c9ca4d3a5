// Post-processors of tokenizer.json ("post_processor"): add special tokens (BOS/EOS, CLS/SEP)
// around an encoded single sequence when add_special_tokens is set. Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/json_fields.h"

namespace switchyard::text::internal {

class PostProcessor {
 public:
  // `prefix` ids go before the sequence, `suffix` ids after (TemplateProcessing's "single").
  PostProcessor(std::vector<int32_t> prefix, std::vector<int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}

  void Apply(std::vector<int32_t>* ids) const;

 private:
  std::vector<int32_t> prefix_, suffix_;
};

// Builds one from its JSON object: TemplateProcessing, RobertaProcessing, BertProcessing,
// ByteLevel (adds nothing) and Sequence of those.
absl::StatusOr<std::unique_ptr<PostProcessor>> ParsePostProcessor(simdjson::dom::element json,
                                                                  const base::JsonPath& at);

}  // namespace switchyard::text::internal
