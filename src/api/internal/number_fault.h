// Locates the number that made simdjson refuse a request body, so that the 400 names the
// field it sits in, as vLLM's (Pydantic's) validation does. JSON allows numbers that our
// parser cannot hold: integers beyond 64 bits (seed: 18446744073709551616) and decimals
// beyond double's range (max_tokens: 1e309); simdjson rejects the whole document for them,
// which would otherwise be answered as "not valid JSON" with no field.
//
// Stateless; any thread.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace switchyard::api::internal {

// Where and what the first out-of-range number of a JSON object text is.
struct NumberFault {
  // The root object's field that holds it (it may be nested deeper inside that field), as
  // written in the body (escapes not decoded); empty when the number is not inside a field.
  std::string_view field;
  bool integer = false;   // an integer literal beyond 64 bits (else a decimal beyond double)
  bool negative = false;  // its sign
};

// The first number of `json` that is well-formed JSON but out of range, or nullopt when
// there is none. `zeroed` receives `json` with every such number replaced by 0: the caller
// parses it to tell a body that is valid but for its numbers from one broken some other way.
std::optional<NumberFault> FindNumberFault(std::string_view json, std::string* zeroed);

// The 400 for `fault`: InvalidParam naming the field when it is one a request of ours reads
// (never an unknown key: messages echo known names only), else a plain InvalidArgument.
absl::Status NumberFaultError(const NumberFault& fault);

}  // namespace switchyard::api::internal
