// KubePoolResolver: the members of pools discovered through the Kubernetes API
// (`pools[].inferencePool` in the router config). For each such pool it watches the
// InferencePool object (list + watch by metadata.name) for its pod selector and target
// ports, and the pods of its namespace that the selector matches; every ready pod
// (kube/pod.h: Running, Ready=True, an IP, not being deleted) on every target port is an
// endpoint, named "<ip>:<port>" as DnsPoolResolver names its members (the name the metrics,
// the prefix index and session tokens key on: a pod that comes back with a new IP holds none
// of the old one's cache, so it should not inherit its history), with the pod's labels as
// the endpoint's labels (so label filters such as llm-d.ai/role work). The pool's static
// endpoints stay members too. Members go to the table through SetPoolMembers after each
// change to the pool's pods (within the watch's latency: milliseconds). A selector change
// restarts the pod watch; a port change republishes.
//
// A failure to reach the API server (down, restarting, a refused token) keeps the members
// last seen and retries with backoff (kube/reflector.h), logging why; a deleted
// InferencePool empties the pool.
//
// Threads: Start loads each pool's kubeconfig (or the in-cluster config) on the calling
// thread, then runs two reflector threads per pool. Stop joins them. synced() and stats()
// from any thread. Borrows the table, which must outlive it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "kube/kube_config.h"
#include "kube/list_watch_client.h"
#include "kube/pod.h"
#include "kube/reflector.h"
#include "router/endpoint_table.h"
#include "router/router_config.h"

namespace switchyard::router {

// The members of `pool` (its inferencePool) for `pods` (ready or not) on `ports`, in name
// order, after `static_members`; a name already taken keeps its first spec.
std::vector<EndpointSpec> KubePoolMembers(const PoolConfig& pool,
                                          const std::vector<kube::Pod>& pods,
                                          const std::vector<int>& ports);

// One reflector's counters, for the router's metrics.
struct KubeWatchStats {
  std::string pool;
  std::string resource;  // "inferencepool" or "pods"
  kube::ReflectorStats stats;
};

class KubePoolResolver {
 public:
  using ClientFactory = std::function<absl::StatusOr<std::unique_ptr<kube::ListWatchClient>>(
      const kube::KubeConfig&)>;

  // Keeps the pools of `pools` that have an inferencePool (the others are left alone).
  KubePoolResolver(const std::vector<PoolConfig>& pools, EndpointTable* table,
                   ClientFactory make_client = DefaultClient);
  ~KubePoolResolver();
  KubePoolResolver(const KubePoolResolver&) = delete;
  KubePoolResolver& operator=(const KubePoolResolver&) = delete;

  // Loads the configs and starts watching. An error (a kubeconfig that cannot be read or
  // parsed, no in-cluster config) names the pool. Call once.
  absl::Status Start();
  // Idempotent.
  void Stop();

  // Every pool's pods have been listed at least once.
  bool synced() const;
  std::vector<KubeWatchStats> stats() const;

  static absl::StatusOr<std::unique_ptr<kube::ListWatchClient>> DefaultClient(
      const kube::KubeConfig& config);

 private:
  class Pool;

  EndpointTable* const table_;
  const ClientFactory make_client_;
  std::vector<std::unique_ptr<Pool>> pools_;
};

}  // namespace switchyard::router
