// ByteRanges: a list of [begin, end) byte ranges of a text (regex matches, pre-tokenized
// words). Room for a short prompt's words is inline, so that encoding one allocates nothing
// for them.
#pragma once

#include <cstddef>
#include <utility>

#include "absl/container/inlined_vector.h"

namespace switchyard::text::internal {

using ByteRanges = absl::InlinedVector<std::pair<size_t, size_t>, 16>;

}  // namespace switchyard::text::internal
