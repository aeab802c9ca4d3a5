// The handles of the transfer engine's API (transfer_engine.h) and a transfer's states.
// Handles are small values, copyable and usable from any thread; they mean something only
// to the TransferEngine that returned them.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace switchyard::kvx {

namespace internal {
struct Transfer;
}  // namespace internal

// A registered MemoryRegion.
struct RegionHandle {
  uint32_t index = 0;
};

// A prepared block list (descriptor table) of one registered region.
struct BlockListHandle {
  uint32_t index = 0;
};

// kPending: queued. kRunning: a transfer thread is copying it. The other three are final.
enum class TransferState { kPending, kRunning, kDone, kFailed, kCancelled };

std::string_view TransferStateName(TransferState state);

// A transfer's state and, when final, its outcome: OK for kDone, Cancelled for kCancelled,
// the error for kFailed; OK while pending or running.
struct TransferStatus {
  TransferState state = TransferState::kPending;
  absl::Status status;
};

// Called once, on a transfer thread, when a transfer reaches its final state (which Poll
// already reports by then), with that state and outcome.
using TransferCallback = absl::AnyInvocable<void(TransferState state, const absl::Status& status)>;

// One posted transfer. Keeps its record alive for Poll and Cancel after the engine has
// finished it; the record goes when the engine and every copy of the handle have let go.
class TransferHandle {
 public:
  TransferHandle() = default;
  bool valid() const { return transfer_ != nullptr; }

 private:
  friend class TransferEngine;
  explicit TransferHandle(std::shared_ptr<internal::Transfer> transfer)
      : transfer_(std::move(transfer)) {}

  std::shared_ptr<internal::Transfer> transfer_;
};

}  // namespace switchyard::kvx
