#include "router/flow/drop_reason.h"

namespace switchyard::router::flow {

std::string_view DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kSaturated:
      return "rejected-saturated";
    case DropReason::kTtlExpired:
      return "rejected-ttl-expired";
    case DropReason::kContextCancelled:
      return "rejected-context-cancelled";
    case DropReason::kShuttingDown:
      return "rejected-shutting-down";
  }
  return "rejected-other";
}

}  // namespace switchyard::router::flow
