// SaturationDetector (llm-d's): how full the fleet is, from a snapshot of its endpoints, so
// that flow control holds requests in the router instead of piling them into engine queues.
//
//   Saturation(endpoints, now)  0 = idle; >= 1 = saturated: hold what is not yet sent
//   HasIdleCapacity(endpoints)  some endpoint takes one more request with nothing waiting
//                               on it: the only capacity sheddable (priority < 0) requests
//                               may use
//
// The two kinds (utilization_detector.h, concurrency_detector.h) also act as scheduling
// filters, as llm-d's do: they keep the endpoints under their limit times (1 + headroom),
// and every candidate when none is (fail open). Immutable after construction; any thread.
#pragma once

#include <chrono>
#include <span>

#include "router/endpoint.h"

namespace switchyard::router::flow {

class SaturationDetector {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~SaturationDetector() = default;
  // An empty fleet is saturated (1).
  virtual double Saturation(std::span<const Endpoint> endpoints, Clock::time_point now) const = 0;
  virtual bool HasIdleCapacity(std::span<const Endpoint> endpoints,
                               Clock::time_point now) const = 0;
};

}  // namespace switchyard::router::flow
