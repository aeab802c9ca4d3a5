#include "kvx/transfer_handle.h"

namespace switchyard::kvx {

std::string_view TransferStateName(TransferState state) {
  switch (state) {
    case TransferState::kPending:
      return "pending";
    case TransferState::kRunning:
      return "running";
    case TransferState::kDone:
      return "done";
    case TransferState::kFailed:
      return "failed";
    case TransferState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace switchyard::kvx
