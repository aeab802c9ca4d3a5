#include "cli/second_signal.h"

#include <pthread.h>

#include <atomic>
#include <thread>

#include "base/thread_name.h"

namespace switchyard::cli {

bool AwaitUnlessSignalled(const sigset_t& signals, std::chrono::steady_clock::time_point deadline,
                          const std::function<bool(std::chrono::steady_clock::time_point)>& await,
                          const std::function<void(int signal)>& interrupt) {
  std::atomic<bool> over{false};
  std::thread watcher([&signals, &interrupt, &over] {
    base::SetCurrentThreadName("sy-signals");
    int signal = 0;
    sigwait(&signals, &signal);
    if (!over.load())
      interrupt(signal);
  });
  const bool done = await(deadline);
  over = true;
  // SIGTERM is blocked in every thread (REQUIRES), so it only wakes the watcher's sigwait.
  // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return done;
}

}  // namespace switchyard::cli
