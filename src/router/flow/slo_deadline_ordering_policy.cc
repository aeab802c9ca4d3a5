#include "router/flow/slo_deadline_ordering_policy.h"

namespace switchyard::router::flow {

bool SloDeadlineOrderingPolicy::Less(const QueuedItem& a, const QueuedItem& b) const {
  const auto& da = a.request.slo_deadline;
  const auto& db = b.request.slo_deadline;
  if (da.has_value() != db.has_value())
    return da.has_value();
  if (da.has_value() && *da != *db)
    return *da < *db;
  return a.request.received < b.request.received;
}

}  // namespace switchyard::router::flow
