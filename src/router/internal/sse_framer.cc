#include "router/internal/sse_framer.h"

#include <algorithm>

#include "fmt/format.h"

namespace switchyard::router::internal {
namespace {

constexpr std::string_view kDoneSpaced = "data: [DONE]";
constexpr std::string_view kDoneTight = "data:[DONE]";

// `line` so far (`at` bytes of it before `bytes`) is still a prefix of `want`.
bool StillPrefix(std::string_view want, size_t at, std::string_view bytes) {
  return at + bytes.size() <= want.size() && want.substr(at, bytes.size()) == bytes;
}

}  // namespace

absl::StatusOr<std::string> SseFramer::Feed(std::string_view chunk) {
  const size_t base = held_.size();
  Cuts cuts;
  size_t i = 0;
  while (i < chunk.size()) {
    if (after_cr_) {
      after_cr_ = false;
      if (chunk[i] == '\n') {  // the CR's LF: one line end
        EndLine(base + i + 1, &cuts);
        ++i;
        continue;
      }
      EndLine(base + i, &cuts);
    }
    const size_t eol = chunk.find_first_of("\r\n", i);
    const size_t stop = eol == std::string_view::npos ? chunk.size() : eol;
    if (stop > i)
      LineBytes(chunk.substr(i, stop - i));
    if (eol == std::string_view::npos)
      break;
    i = eol + 1;
    if (chunk[eol] == '\r') {
      after_cr_ = true;  // a CR line end, or the first half of a CRLF: the next byte tells
      continue;
    }
    EndLine(base + i, &cuts);
  }
  std::string out;
  if (cuts.cut == std::string_view::npos) {
    held_.append(chunk);
  } else {
    if (cuts.cut > cuts.start) {
      out.reserve(cuts.cut - cuts.start);
      if (cuts.start < base)
        out.append(held_, cuts.start, base - cuts.start);
      const size_t from = std::max(cuts.start, base) - base;
      out.append(chunk.substr(from, cuts.cut - base - from));
    }
    held_.assign(chunk.substr(cuts.cut - base));
  }
  if (held_.size() > kMaxEventBytes) {
    return absl::InternalError(
        fmt::format("an SSE event over {} bytes (not an event stream)", kMaxEventBytes));
  }
  return out;
}

std::string SseFramer::End() {
  if (!after_cr_)
    return std::string();
  after_cr_ = false;
  Cuts cuts;
  EndLine(held_.size(), &cuts);
  std::string out;
  if (cuts.cut != std::string_view::npos && cuts.cut > cuts.start)
    out = held_.substr(cuts.start, cuts.cut - cuts.start);
  held_.clear();
  return out;
}

void SseFramer::LineBytes(std::string_view bytes) {
  if (line_bytes_ == 0)
    line_comment_ = bytes.front() == ':';
  line_done_spaced_ = line_done_spaced_ && StillPrefix(kDoneSpaced, line_bytes_, bytes);
  line_done_tight_ = line_done_tight_ && StillPrefix(kDoneTight, line_bytes_, bytes);
  line_bytes_ += bytes.size();
}

void SseFramer::EndLine(size_t end, Cuts* cuts) {
  if (line_bytes_ == 0) {
    // A blank line: the event ends here.
    if (event_fields_ > 0) {
      done_ = event_fields_ == 1 && event_done_;
      skipping_ = false;
    } else if (skipping_) {
      cuts->start = end;  // a comment-only event before any data: dropped
    }
    cuts->cut = end;
    event_fields_ = 0;
    event_done_ = false;
  } else if (!line_comment_) {
    ++event_fields_;
    event_done_ = (line_done_spaced_ && line_bytes_ == kDoneSpaced.size()) ||
                  (line_done_tight_ && line_bytes_ == kDoneTight.size());
  }
  line_bytes_ = 0;
  line_comment_ = false;
  line_done_spaced_ = true;
  line_done_tight_ = true;
}

}  // namespace switchyard::router::internal
