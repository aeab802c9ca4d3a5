// Pieces shared by the builtin filter files: each file's table of filters (FindFilter in
// filters.cc searches them all) and argument helpers. Stateless; thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "absl/status/statusor.h"

#include "text/jinja/builtins.h"

namespace switchyard::text::jinja {

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

std::span<const FilterEntry> StringFilters();    // filters_string.cc
std::span<const FilterEntry> SequenceFilters();  // filters_sequence.cc
std::span<const FilterEntry> NumberFilters();    // filters_number.cc

// TypeError for a filter given the wrong kind of value.
absl::Status WantType(std::string_view filter, std::string_view what, const Value& got);
// Jinja's make_attrgetter: "a.b.0" looked up item by item; a non-string attribute is one key.
absl::StatusOr<Value> AttrPath(Interpreter& in, const Value& v, const Value& attribute);

}  // namespace switchyard::text::jinja
