// A one-line progress bar redrawn in place on a terminal, for work a person waits on at
// start-up (compiling the step buckets):
//   compiling steps [##########----------] 3/6  16 tokens: measured, 0.41 s
// On anything that is not a terminal it draws nothing (log lines say the same there).
// Not thread-safe: one thread updates it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace switchyard::cli {

class TerminalProgress {
 public:
  // Draws nothing until the first Update (other start-up output may come before it).
  TerminalProgress(std::FILE* out, std::string label, size_t total);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  // `done` of `total` are done; `detail` says what the last one was. The bar ends its line
  // when done reaches total.
  void Update(size_t done, std::string_view detail);

 private:
  std::FILE* out_;  // null: not a terminal
  std::string label_;
  size_t total_;
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace switchyard::cli
