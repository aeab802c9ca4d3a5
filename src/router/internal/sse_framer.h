// SseFramer: cuts an upstream's text/event-stream into whole events, so that the router passes
// on only complete events and holds an incomplete tail until the blank line that ends it (the
// SSE spec's line ends are CRLF, LF and CR, so an event ends at "\n\n", "\r\r", "\r\n\r\n" or
// a mix). When the upstream fails mid-event, the partial event is dropped with the framer
// and the client's stream stands at an event boundary, where the router's error event follows
// cleanly; a client reading `data: {"id":"x","choidata: {"error":...` would fail to parse JSON
// rather than see an API error.
//
// Until the first event with a field (a `data:` line) it drops comment-only events (`:
// keep-alive`): our engine sends those while a stream waits in its queue. They show the
// engine alive (every body byte resets the upstream's idle timeout) but go nowhere, so nothing
// has reached the client and the request can still be retried elsewhere. From the first
// event with a field on, every event passes.
//
// It also tells whether the last event with a field was `data: [DONE]`: a stream that ends
// otherwise was cut short.
//
// One per upstream attempt; not thread-safe (the ProxyCall's lock guards it). Feed allocates
// only the string it returns (one per chunk that completes an event, as a copy of the chunk
// would); the held tail reuses its capacity.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::router::internal {

class SseFramer {
 public:
  // An event larger than this is not SSE from an engine: the stream is malformed.
  static constexpr size_t kMaxEventBytes = 16 << 20;

  // Takes the next body bytes. Returns the events they complete (with the part held from
  // earlier chunks), less dropped comment-only ones, as the bytes to pass on; empty when
  // none. Errors: Internal when the held event grows past kMaxEventBytes.
  absl::StatusOr<std::string> Feed(std::string_view chunk);
  // The body ended: returns an event that only the end completes (its last line ended by a
  // CR), usually nothing. What is held after that is an unfinished event, dropped as the
  // spec tells a client to drop it.
  std::string End();
  // The last event with a field was `data: [DONE]`.
  bool done() const { return done_; }

 private:
  // Where one Feed cuts, as offsets into the held bytes followed by the chunk.
  struct Cuts {
    size_t cut = std::string_view::npos;  // the end of the last complete event
    size_t start = 0;                     // where passing on starts (after dropped events)
  };
  // A line ended at `end` (just past its line end); a blank line ends an event there.
  void EndLine(size_t end, Cuts* cuts);
  // More bytes of the current line (no line end among them; not empty).
  void LineBytes(std::string_view bytes);

  std::string held_;              // the bytes after the last complete event
  bool skipping_ = true;          // no event with a field yet: comment-only ones are dropped
  bool after_cr_ = false;         // the last byte was a CR (a CRLF's LF may follow)
  size_t line_bytes_ = 0;         // of the current line so far
  bool line_comment_ = false;     // it starts with ':'
  bool line_done_spaced_ = true;  // it is so far a prefix of "data: [DONE]"
  bool line_done_tight_ = true;   // ... of "data:[DONE]"
  int event_fields_ = 0;          // field (non-comment) lines in the current event
  bool event_done_ = false;       // its last field line was a [DONE]
  bool done_ = false;
};

}  // namespace switchyard::router::internal
