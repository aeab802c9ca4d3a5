// LogitsRecordingRunner: a ModelRunner that runs another one and keeps a copy of the first
// logit row of the first `max_rows` steps that return logits, as the inner runner wrote them
// (before any sampling transform). `switchyard generate --dump-logits` reads the raw logits of
// the serving path through it.
//
// Threads: the engine loop calls it as any runner; read rows() only once the loop has stopped
// (EngineCore::Stop joins it). Owns the inner runner.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model_runner.h"

namespace switchyard::cli {

class LogitsRecordingRunner final : public engine::ModelRunner {
 public:
  LogitsRecordingRunner(std::unique_ptr<engine::ModelRunner> inner, int64_t max_rows);

  const engine::RunnerLimits& limits() const override { return inner_->limits(); }
  absl::Status Execute(const model::ForwardBatch& batch, std::span<float> logits) override;
  std::string backend_name() const override { return inner_->backend_name(); }

  // The recorded rows, vocab_size floats each, in step order.
  const std::vector<float>& rows() const { return rows_; }

 private:
  std::unique_ptr<engine::ModelRunner> inner_;
  size_t max_floats_;
  std::vector<float> rows_;
};

}  // namespace switchyard::cli
