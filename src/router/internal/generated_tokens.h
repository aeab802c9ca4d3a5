// GeneratedTokens: how many tokens an upstream's response has generated, as far as the router
// sees its bytes, for the tenant's token quota and the endpoint's in-flight tokens.
//
//   - A completion chunk of an SSE stream counts one token: vLLM, SGLang, llama.cpp's server
//     and our engine send one token per chunk by default (a server that batches tokens per
//     chunk, or sends a last chunk with only a finish_reason, is miscounted by that much),
//     except vLLM's first chat chunk, which only announces the assistant role.
//   - A `usage` object with `completion_tokens` (a whole JSON response's; a stream's last
//     chunk when the client asked stream_options.include_usage; every chunk with vLLM's
//     continuous_usage_stats) is the exact count, and replaces the estimate.
//
// Each Feed returns the change in the count (negative when a usage object corrects an
// overestimate). One per upstream attempt; not thread-safe (the ProxyCall's lock guards it).
#pragma once

#include <cstdint>
#include <string_view>

namespace switchyard::router::internal {

class GeneratedTokens {
 public:
  // Whole SSE events (SseFramer's output).
  int64_t FeedEvents(std::string_view events);
  // A whole JSON response body.
  int64_t FeedBody(std::string_view json);
  int64_t count() const { return count_; }

 private:
  // Sets the count to `exact` (when set); returns the change.
  int64_t SetExact(int64_t exact);

  int64_t count_ = 0;
};

}  // namespace switchyard::router::internal
