// DropReason: why flow control ended a queued request without dispatching it, as llm-d
// names it in the x-llm-d-request-dropped-reason header and its metrics' labels.
#pragma once

#include <cstddef>
#include <string_view>

namespace switchyard::router::flow {

enum class DropReason {
  kSaturated,         // a full queue: the global, band or flow limit (llm-d "rejected-saturated")
  kTtlExpired,        // waited out its TTL budget
  kContextCancelled,  // the client went away while it waited
  kShuttingDown,      // the controller shut down
};

inline constexpr size_t kDropReasonCount = 4;

// llm-d's string: "rejected-saturated", "rejected-ttl-expired", "rejected-context-cancelled",
// "rejected-shutting-down".
std::string_view DropReasonName(DropReason reason);

}  // namespace switchyard::router::flow
