// Status propagation macros. Debian's Abseil (20220623) has no ABSL_RETURN_IF_ERROR, so
// these are ours.
//
//   SY_RETURN_IF_ERROR(DoThing());            // returns the Status if not ok
//   SY_ASSIGN_OR_RETURN(auto v, MakeThing()); // declares v, or returns the error
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SY_STATUS_CONCAT_INNER_(a, b) a##b
#define SY_STATUS_CONCAT_(a, b) SY_STATUS_CONCAT_INNER_(a, b)

#define SY_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status sy_status_ = (expr);           \
    if (!sy_status_.ok()) return sy_status_;      \
  } while (false)

#define SY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#define SY_ASSIGN_OR_RETURN(lhs, expr) \
  SY_ASSIGN_OR_RETURN_IMPL_(SY_STATUS_CONCAT_(sy_statusor_, __LINE__), lhs, expr)
