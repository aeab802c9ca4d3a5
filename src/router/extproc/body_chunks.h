// How the ext_proc server re-sends a request body to Envoy: as streamed body mutations of at
// most kMaxBodyChunkBytes each (llm-d's EPP's limit, under Envoy's 64 KiB per message).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace switchyard::router::extproc {

inline constexpr size_t kMaxBodyChunkBytes = 62'000;

// `body` cut in order into pieces of at most `max_bytes` (> 0), all full but the last; an
// empty body is one empty piece (the message that carries end_of_stream). The pieces view
// `body`.
std::vector<std::string_view> BodyChunks(std::string_view body,
                                         size_t max_bytes = kMaxBodyChunkBytes);

}  // namespace switchyard::router::extproc
