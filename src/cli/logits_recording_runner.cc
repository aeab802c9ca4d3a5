#include "cli/logits_recording_runner.h"

#include <utility>

#include "base/status_macros.h"

namespace switchyard::cli {

LogitsRecordingRunner::LogitsRecordingRunner(std::unique_ptr<engine::ModelRunner> inner,
                                             int64_t max_rows)
    : inner_(std::move(inner)),
      max_floats_(static_cast<size_t>(max_rows * inner_->limits().vocab_size)) {
  rows_.reserve(max_floats_);
}

absl::Status LogitsRecordingRunner::Execute(const model::ForwardBatch& batch,
                                            std::span<float> logits) {
  SY_RETURN_IF_ERROR(inner_->Execute(batch, logits));
  const auto vocab = static_cast<size_t>(inner_->limits().vocab_size);
  if (rows_.size() < max_floats_ && logits.size() >= vocab)
    rows_.insert(rows_.end(), logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(vocab));
  return absl::OkStatus();
}

}  // namespace switchyard::cli
