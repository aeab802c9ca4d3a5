#include "net/event_loops.h"

#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "net/internal/event_loop.h"

namespace switchyard::net {

absl::StatusOr<std::shared_ptr<EventLoops>> EventLoops::Start(int num_threads,
                                                              const std::string& name) {
  if (num_threads < 1)
    return absl::InvalidArgumentError("net: num_threads must be at least 1");
  // spdlog creates its registry on first use, inside the uninstrumented libspdlog, so TSan
  // cannot see that creation synchronised; making the first use here, before the loops
  // start, keeps it off them.
  spdlog::default_logger_raw();
  std::vector<std::unique_ptr<internal::EventLoop>> loops;
  loops.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i)
    loops.push_back(std::make_unique<internal::EventLoop>(fmt::format("{}-{}", name, i)));
  return std::shared_ptr<EventLoops>(new EventLoops(std::move(loops)));
}

EventLoops::EventLoops(std::vector<std::unique_ptr<internal::EventLoop>> loops)
    : loops_(std::move(loops)) {}

EventLoops::~EventLoops() {
  Stop();
}

std::optional<size_t> EventLoops::CurrentLoop() const {
  const internal::EventLoop* current = internal::EventLoop::Current();
  if (current == nullptr)
    return std::nullopt;
  for (size_t i = 0; i < loops_.size(); ++i) {
    if (loops_[i].get() == current)
      return i;
  }
  return std::nullopt;
}

void EventLoops::Stop() {
  for (auto& loop : loops_)
    loop->Stop();
}

}  // namespace switchyard::net
