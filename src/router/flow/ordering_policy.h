// OrderingPolicy: which of a flow's queued requests goes first, llm-d's third tier of flow
// control (strict priority across bands, a fairness policy between a band's flows, then this
// inside a flow). A band has one; global-strict fairness also uses it to compare the heads of
// different flows. Stateless and immutable: thread-safe.
#pragma once

#include <string_view>

#include "router/flow/flow_item.h"

namespace switchyard::router::flow {

class OrderingPolicy {
 public:
  virtual ~OrderingPolicy() = default;

  // Whether `a` goes before `b`: the policy's order, ties in arrival order. A strict total
  // order over distinct items.
  bool Before(const QueuedItem& a, const QueuedItem& b) const {
    if (Less(a, b))
      return true;
    if (Less(b, a))
      return false;
    return a.seq < b.seq;
  }

  // llm-d's type name.
  virtual std::string_view type() const = 0;

 private:
  // The policy's strict weak order; Before breaks its ties.
  virtual bool Less(const QueuedItem& a, const QueuedItem& b) const = 0;
};

}  // namespace switchyard::router::flow
