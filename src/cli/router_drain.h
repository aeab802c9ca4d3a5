// The router's side of a graceful shutdown, shared by `switchyard router` and
// `switchyard up`: waits for SIGINT or SIGTERM, then drains the router (router_server.h:
// /health 503, new requests 503 with Retry-After, requests in flight go on) for up to
// `shutdown_timeout`, ends what is left with a clean error, and returns; the caller then
// stops everything. A second signal during the drain ends it at once (still with clean
// errors). Main thread only.
#pragma once

#include <signal.h>

#include <chrono>

#include "router/router_server.h"

namespace switchyard::cli {

// --shutdown-timeout's default, in seconds (the engine's flag, in the same unit, defaults to
// vLLM's 0; a router holds many clients' long streams, and Kubernetes gives a pod 30 s).
inline constexpr double kDefaultShutdownTimeoutS = 30;

// REQUIRES: `signals` (SIGINT and SIGTERM) blocked in every thread (blocked before any
// thread started), so that only this function takes them.
void DrainRouterOnSignal(const sigset_t& signals, std::chrono::duration<double> shutdown_timeout,
                         router::RouterServer* router, const char* who);

}  // namespace switchyard::cli
