// Transfer: one posted transfer's record, shared by the engine's queue, the transfer thread
// that runs it and every TransferHandle the caller keeps.
//
// Threads: the fields above `state` are written once by Post before the record is queued
// and only read afterwards. `state` moves kPending -> kRunning (the transfer thread that
// pops it) or kPending -> kCancelled (Cancel, or the engine shutting down), then kRunning ->
// a final state (the transfer thread); `failure` is written before kFailed is stored with
// release order, so a reader that loads kFailed with acquire order may read it.
// `on_done` is taken and called by the one transfer thread that finishes the record.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

#include "kvx/internal/descriptor_table.h"
#include "kvx/transfer_handle.h"

namespace switchyard::kvx::internal {

struct Transfer {
  // Moves kPending to kCancelled; false when it had left kPending already.
  bool CancelIfPending() {
    TransferState expected = TransferState::kPending;
    return state.compare_exchange_strong(expected, TransferState::kCancelled,
                                         std::memory_order_acq_rel);
  }

  const DescriptorTable* src = nullptr;
  const DescriptorTable* dst = nullptr;
  std::vector<int32_t> src_entries;
  std::vector<int32_t> dst_entries;
  TransferCallback on_done;

  std::atomic<TransferState> state{TransferState::kPending};
  // Set by Cancel while the transfer runs; read between copy ops.
  std::atomic<bool> cancel_requested{false};
  absl::Status failure;
};

}  // namespace switchyard::kvx::internal
