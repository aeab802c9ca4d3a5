#include "cli/router_drain.h"

#include <pthread.h>

#include <cstdio>
#include <thread>

namespace switchyard::cli {

void DrainRouterOnSignal(const sigset_t& signals, std::chrono::duration<double> shutdown_timeout,
                         router::RouterServer* router, const char* who) {
  int signal = 0;
  sigwait(&signals, &signal);
  std::printf("%s: draining for up to %gs (signal again to stop now)\n", who,
              shutdown_timeout.count());
  std::fflush(stdout);
  router->StartDrain();
  // A second signal cuts the wait short. This thread takes it; once the drain is over
  // without one, a signal sent to the thread itself ends its wait.
  std::thread second([&signals, router] {
    pthread_setname_np(pthread_self(), "sy-signals");
    int again = 0;
    sigwait(&signals, &again);
    router->InterruptDrain();
  });
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(shutdown_timeout);
  if (!router->WaitDrained(deadline)) {
    std::printf("%s: ending the requests still in flight\n", who);
    std::fflush(stdout);
    router->AbortInFlight();
    // Their error responses are on their way out; the calls end as their upstream
    // requests are cancelled, a moment later.
    router->WaitDrained(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  pthread_kill(second.native_handle(), SIGTERM);
  second.join();
}

}  // namespace switchyard::cli
