#include "router/flow/fcfs_ordering_policy.h"

namespace switchyard::router::flow {

bool FcfsOrderingPolicy::Less(const QueuedItem& a, const QueuedItem& b) const {
  return a.enqueued < b.enqueued;
}

}  // namespace switchyard::router::flow
