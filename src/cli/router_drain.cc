#include "cli/router_drain.h"

#include <cstdio>

#include "cli/second_signal.h"

namespace switchyard::cli {

void DrainRouterOnSignal(const sigset_t& signals, std::chrono::duration<double> shutdown_timeout,
                         router::RouterServer* router, const char* who) {
  int signal = 0;
  sigwait(&signals, &signal);
  std::printf("%s: draining for up to %gs (signal again to stop now)\n", who,
              shutdown_timeout.count());
  std::fflush(stdout);
  router->StartDrain();
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(shutdown_timeout);
  const auto await = [router](std::chrono::steady_clock::time_point until) {
    return router->WaitDrained(until);
  };
  if (!AwaitUnlessSignalled(signals, deadline, await,
                            [router](int /*signal*/) { router->InterruptDrain(); })) {
    std::printf("%s: ending the requests still in flight\n", who);
    std::fflush(stdout);
    router->AbortInFlight();
    // Their error responses are on their way out; the calls end as their upstream
    // requests are cancelled, a moment later.
    router->WaitDrained(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
}

}  // namespace switchyard::cli
