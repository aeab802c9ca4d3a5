#include "router/flow/edf_ordering_policy.h"

namespace switchyard::router::flow {
namespace {

// A far-future deadline for an item without a TTL, so that it sorts after every real one.
Clock::time_point Deadline(const QueuedItem& item) {
  return item.ttl > Clock::duration::zero() ? item.enqueued + item.ttl : Clock::time_point::max();
}

}  // namespace

bool EdfOrderingPolicy::Less(const QueuedItem& a, const QueuedItem& b) const {
  const Clock::time_point da = Deadline(a);
  const Clock::time_point db = Deadline(b);
  if (da != db)
    return da < db;
  return a.enqueued < b.enqueued;
}

}  // namespace switchyard::router::flow
