// Status propagation macros. Debian's Abseil (20220623) has no ABSL_RETURN_IF_ERROR, so
// these are ours.
//
//   SY_RETURN_IF_ERROR(DoThing());            // returns the Status if not ok
//   SY_ASSIGN_OR_RETURN(auto v, MakeThing()); // declares v, or returns the error
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SY_INTERNAL_STATUS_CONCAT_INNER(a, b) a##b
#define SY_INTERNAL_STATUS_CONCAT(a, b) SY_INTERNAL_STATUS_CONCAT_INNER(a, b)

// NOLINTBEGIN(bugprone-macro-parentheses): tmp names the variable a macro declares and lhs
// is a declaration (`auto v`); neither is an expression that parentheses could group.
#define SY_INTERNAL_RETURN_IF_ERROR(tmp, expr) \
  do {                                         \
    ::absl::Status tmp = (expr);               \
    if (!tmp.ok())                             \
      return tmp;                              \
  } while (false)

// The temporary is named by line so that nested uses (in lambdas) do not shadow.
#define SY_RETURN_IF_ERROR(expr) \
  SY_INTERNAL_RETURN_IF_ERROR(SY_INTERNAL_STATUS_CONCAT(sy_status_, __LINE__), expr)

#define SY_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok())                                     \
    return std::move(tmp).status();                  \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#define SY_ASSIGN_OR_RETURN(lhs, expr) \
  SY_INTERNAL_ASSIGN_OR_RETURN(SY_INTERNAL_STATUS_CONCAT(sy_statusor_, __LINE__), lhs, expr)
