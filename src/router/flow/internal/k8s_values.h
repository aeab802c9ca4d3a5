// The value syntaxes of llm-d's Kubernetes-style config fields: resource quantities
// (resource.Quantity: "1Gi", "500M", "1k", "1e3", "1000") and durations (metav1.Duration, Go's
// time.ParseDuration: "60s", "500ms", "2m", "1h30m", "1.5s", "0").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace switchyard::router::flow::internal {

// A quantity: an optional sign, a decimal number, then a binary suffix (Ki Mi Gi Ti Pi Ei,
// powers of 1024), a decimal one (k M G T P E, powers of 1000) or an exponent (e3, E-2).
// A fraction is rounded up to a whole count, as Quantity.Value() does. nullopt: not a
// quantity, or beyond int64. (Sub-unit suffixes such as "m" are not accepted: a fraction of
// a byte or a request means nothing here.)
std::optional<int64_t> ParseQuantity(std::string_view text);

// A Go duration: an optional sign, then one or more decimal numbers each with a unit (ns, us,
// µs, ms, s, m, h), or "0". nullopt: not a duration, or beyond int64 nanoseconds.
std::optional<std::chrono::nanoseconds> ParseGoDuration(std::string_view text);

}  // namespace switchyard::router::flow::internal
