#include "cli/terminal_progress.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "fmt/format.h"

namespace switchyard::cli {
namespace {

constexpr size_t kBarWidth = 20;

// The line drawn for `done` of `total` (no carriage return).
std::string Render(std::string_view label, size_t done, size_t total, std::string_view detail) {
  const size_t filled = total == 0 ? kBarWidth : std::min(done, total) * kBarWidth / total;
  std::string line = fmt::format("{} [{}{}] {}/{}", label, std::string(filled, '#'),
                                 std::string(kBarWidth - filled, '-'), done, total);
  if (!detail.empty())
    line += fmt::format("  {}", detail);
  return line;
}

}  // namespace

TerminalProgress::TerminalProgress(std::FILE* out, std::string label, size_t total)
    : out_(out != nullptr && isatty(fileno(out)) != 0 ? out : nullptr),
      label_(std::move(label)),
      total_(total) {}

TerminalProgress::~TerminalProgress() {
  // A bar left mid-way (start-up failed) still gives the terminal its line back.
  if (out_ != nullptr && drawn_ && !finished_)
    std::fputc('\n', out_);
}

void TerminalProgress::Update(size_t done, std::string_view detail) {
  if (out_ == nullptr || finished_)
    return;
  // \r and erase-to-end-of-line: a shorter line leaves nothing of the last one behind.
  std::fputs(fmt::format("\r{}\x1b[K", Render(label_, done, total_, detail)).c_str(), out_);
  if (done >= total_) {
    std::fputc('\n', out_);
    finished_ = true;
  }
  drawn_ = true;
  std::fflush(out_);
}

}  // namespace switchyard::cli
