// AwaitUnlessSignalled: the wait of a graceful shutdown that a second SIGINT or SIGTERM cuts
// short, shared by the engine's and the router's drains. While `await(deadline)` runs on the
// calling thread, a watcher thread takes the next signal of `signals` and calls `interrupt`
// (which must make `await` return); once `await` returned without one, the watcher is woken
// by a signal aimed at it alone and joined. Main thread only.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>

namespace switchyard::cli {

// Returns what `await` returned. REQUIRES: `signals` (SIGINT and SIGTERM) blocked in every
// thread, so that only the watcher's sigwait takes them.
bool AwaitUnlessSignalled(const sigset_t& signals, std::chrono::steady_clock::time_point deadline,
                          const std::function<bool(std::chrono::steady_clock::time_point)>& await,
                          const std::function<void(int signal)>& interrupt);

}  // namespace switchyard::cli
