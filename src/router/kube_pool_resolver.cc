#include "router/kube_pool_resolver.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "kube/api_client.h"
#include "kube/inference_pool.h"

namespace switchyard::router {
namespace {

bool SameMembers(const std::vector<EndpointSpec>& a, const std::vector<EndpointSpec>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const EndpointSpec& x, const EndpointSpec& y) {
                      return x.name == y.name && x.labels == y.labels;
                    });
}

}  // namespace

std::vector<EndpointSpec> KubePoolMembers(const PoolConfig& pool,
                                          const std::vector<kube::Pod>& pods,
                                          const std::vector<int>& ports) {
  std::vector<EndpointSpec> specs;
  std::set<std::string> names;
  for (const StaticEndpointConfig& e : pool.endpoints) {
    if (names.insert(e.spec.name).second)
      specs.push_back(e.spec);
  }
  std::vector<EndpointSpec> found;
  for (const kube::Pod& pod : pods) {
    if (!pod.ready)
      continue;
    for (int port : ports) {
      EndpointSpec spec;
      spec.address = MemberAddress(pod.ip, port);
      spec.name = spec.address;
      spec.labels = pod.labels;
      spec.engine = pool.inference_pool->engine;
      spec.pool = pool.name;
      spec.authorization = pool.authorization;
      spec.credentials = pool.credentials;
      found.push_back(std::move(spec));
    }
  }
  std::sort(found.begin(), found.end(),
            [](const EndpointSpec& a, const EndpointSpec& b) { return a.name < b.name; });
  for (EndpointSpec& spec : found) {
    if (names.insert(spec.name).second)
      specs.push_back(std::move(spec));
  }
  return specs;
}

// One pool: a reflector on its InferencePool, and one on the pods its selector matches
// (replaced when the selector changes).
class KubePoolResolver::Pool {
 public:
  Pool(PoolConfig config, EndpointTable* table) : config_(std::move(config)), table_(table) {}
  ~Pool() { Stop(); }

  absl::Status Start(const ClientFactory& make_client) {
    const InferencePoolRefConfig& ref = *config_.inference_pool;
    absl::StatusOr<kube::KubeConfig> kube_config =
        ref.kubeconfig.empty() ? kube::InClusterConfig() : kube::LoadKubeconfig(ref.kubeconfig);
    if (!kube_config.ok()) {
      return absl::Status(
          kube_config.status().code(),
          fmt::format("pool {}: {}", config_.name, std::string(kube_config.status().message())));
    }
    kube_config_ = *std::move(kube_config);
    make_client_ = make_client;
    namespace_ = ref.namespace_name.empty() ? kube_config_.namespace_name : ref.namespace_name;
    SY_LOG_INFO("router: pool {}: watching InferencePool {}/{} through {} ({})", config_.name,
                namespace_, ref.name, kube_config_.server, kube_config_.source);
    kube::ReflectorOptions options;
    options.name = fmt::format("pool {} InferencePool {}/{}", config_.name, namespace_, ref.name);
    options.query.path = fmt::format(
        "/apis/inference.networking.k8s.io/v1/namespaces/{}/inferencepools", namespace_);
    options.query.field_selector = "metadata.name=" + ref.name;
    options.on_change = [this](const kube::ObjectStore& objects) { PoolChanged(objects); };
    SY_ASSIGN_OR_RETURN(std::unique_ptr<kube::ListWatchClient> client, make_client_(kube_config_));
    pool_reflector_ = std::make_unique<kube::Reflector>(std::move(client), std::move(options));
    pool_reflector_->Start();
    return absl::OkStatus();
  }

  void Stop() {
    // The pool's reflector first: it is what replaces the pod reflector.
    if (pool_reflector_ != nullptr)
      pool_reflector_->Stop();
    std::unique_ptr<kube::Reflector> pods;
    {
      base::MutexLock lock(&mu_);
      pods = std::move(pod_reflector_);
    }
    if (pods != nullptr)
      pods->Stop();
  }

  bool synced() const {
    base::MutexLock lock(&mu_);
    return pods_synced_;
  }

  void AppendStats(std::vector<KubeWatchStats>* out) const {
    out->push_back(
        {config_.name, "inferencepool",
         pool_reflector_ != nullptr ? pool_reflector_->stats() : kube::ReflectorStats{}});
    base::MutexLock lock(&mu_);
    kube::ReflectorStats pods = retired_pod_stats_;
    if (pod_reflector_ != nullptr) {
      const kube::ReflectorStats live = pod_reflector_->stats();
      pods.lists += live.lists;
      pods.watch_restarts += live.watch_restarts;
      pods.errors += live.errors;
    }
    pods.synced = pods_synced_;
    out->push_back({config_.name, "pods", pods});
  }

 private:
  // On the InferencePool reflector's thread.
  void PoolChanged(const kube::ObjectStore& objects) {
    std::optional<kube::InferencePool> spec;
    for (const auto& [key, object] : objects) {
      absl::StatusOr<kube::InferencePool> decoded = kube::DecodeInferencePool(object);
      if (!decoded.ok()) {
        SY_LOG_WARN("router: pool {}: {}; keeping its members", config_.name,
                    std::string(decoded.status().message()));
        return;
      }
      spec = *std::move(decoded);
    }
    if (spec == spec_ && pod_reflector_started_)
      return;
    const bool selector_changed = !spec_.has_value() || !spec.has_value() ||
                                  spec->match_labels != spec_->match_labels ||
                                  !pod_reflector_started_;
    spec_ = spec;
    if (!spec.has_value()) {
      SY_LOG_WARN("router: pool {}: InferencePool {}/{} not found; the pool has no members",
                  config_.name, namespace_, config_.inference_pool->name);
    } else {
      SY_LOG_INFO("router: pool {}: selector {}, ports {}", config_.name, spec->LabelSelector(),
                  fmt::join(spec->target_ports, ","));
    }
    if (!selector_changed) {
      base::MutexLock lock(&mu_);
      ports_ = spec->target_ports;
      Publish();
      return;
    }
    RestartPods(spec);
  }

  // Stops the pod reflector (outside the lock: its callback takes it) and starts one for
  // `spec`'s selector; with no spec the pool is emptied.
  void RestartPods(const std::optional<kube::InferencePool>& spec) {
    std::unique_ptr<kube::Reflector> old;
    {
      base::MutexLock lock(&mu_);
      old = std::move(pod_reflector_);
      ++generation_;
    }
    if (old != nullptr) {
      old->Stop();
      base::MutexLock lock(&mu_);
      const kube::ReflectorStats s = old->stats();
      retired_pod_stats_.lists += s.lists;
      retired_pod_stats_.watch_restarts += s.watch_restarts;
      retired_pod_stats_.errors += s.errors;
    }
    pod_reflector_started_ = true;
    std::unique_ptr<kube::Reflector> started;
    if (spec.has_value()) {
      absl::StatusOr<std::unique_ptr<kube::ListWatchClient>> client = make_client_(kube_config_);
      if (!client.ok()) {
        SY_LOG_ERROR("router: pool {}: {}", config_.name, std::string(client.status().message()));
      } else {
        kube::ReflectorOptions options;
        options.name = fmt::format("pool {} pods {}", config_.name, spec->LabelSelector());
        options.query.path = fmt::format("/api/v1/namespaces/{}/pods", namespace_);
        options.query.label_selector = spec->LabelSelector();
        uint64_t generation = 0;
        {
          base::MutexLock lock(&mu_);
          generation = generation_;
        }
        options.on_change = [this, generation](const kube::ObjectStore& objects) {
          PodsChanged(generation, objects);
        };
        started = std::make_unique<kube::Reflector>(*std::move(client), std::move(options));
      }
    }
    base::MutexLock lock(&mu_);
    ports_ = spec.has_value() ? spec->target_ports : std::vector<int>{};
    pods_.clear();
    Publish();
    if (started != nullptr) {
      pod_reflector_ = std::move(started);
      pod_reflector_->Start();
    }
  }

  // On the pod reflector's thread.
  void PodsChanged(uint64_t generation, const kube::ObjectStore& objects) {
    std::vector<kube::Pod> pods;
    pods.reserve(objects.size());
    for (const auto& [key, object] : objects) {
      absl::StatusOr<kube::Pod> pod = kube::DecodePod(object);
      if (!pod.ok()) {
        SY_LOG_WARN("router: pool {}: {}", config_.name, std::string(pod.status().message()));
        continue;
      }
      pods.push_back(*std::move(pod));
    }
    base::MutexLock lock(&mu_);
    if (generation != generation_)
      return;  // a reflector being replaced
    pods_ = std::move(pods);
    pods_synced_ = true;
    Publish();
  }

  void Publish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<EndpointSpec> members = KubePoolMembers(config_, pods_, ports_);
    if (published_ && SameMembers(members, members_))
      return;
    SY_LOG_INFO("router: pool {}: {} members (was {})", config_.name, members.size(),
                members_.size());
    members_ = std::move(members);
    published_ = true;
    table_->SetPoolMembers(config_.name, members_);
  }

  const PoolConfig config_;
  EndpointTable* const table_;
  kube::KubeConfig kube_config_;
  ClientFactory make_client_;
  std::string namespace_;
  std::unique_ptr<kube::Reflector> pool_reflector_;
  // Only the InferencePool reflector's thread.
  std::optional<kube::InferencePool> spec_;
  bool pod_reflector_started_ = false;

  mutable base::Mutex mu_;
  // Replaced by the InferencePool reflector's thread; read by stats().
  std::unique_ptr<kube::Reflector> pod_reflector_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  kube::ReflectorStats retired_pod_stats_ ABSL_GUARDED_BY(mu_);
  std::vector<kube::Pod> pods_ ABSL_GUARDED_BY(mu_);
  std::vector<int> ports_ ABSL_GUARDED_BY(mu_);
  bool pods_synced_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<EndpointSpec> members_ ABSL_GUARDED_BY(mu_);
  bool published_ ABSL_GUARDED_BY(mu_) = false;
};

KubePoolResolver::KubePoolResolver(const std::vector<PoolConfig>& pools, EndpointTable* table,
                                   ClientFactory make_client)
    : table_(table), make_client_(std::move(make_client)) {
  for (const PoolConfig& config : pools) {
    if (config.inference_pool.has_value())
      pools_.push_back(std::make_unique<Pool>(config, table_));
  }
}

KubePoolResolver::~KubePoolResolver() {
  Stop();
}

absl::Status KubePoolResolver::Start() {
  for (const std::unique_ptr<Pool>& pool : pools_)
    SY_RETURN_IF_ERROR(pool->Start(make_client_));
  return absl::OkStatus();
}

void KubePoolResolver::Stop() {
  for (const std::unique_ptr<Pool>& pool : pools_)
    pool->Stop();
}

bool KubePoolResolver::synced() const {
  return std::all_of(pools_.begin(), pools_.end(),
                     [](const std::unique_ptr<Pool>& pool) { return pool->synced(); });
}

std::vector<KubeWatchStats> KubePoolResolver::stats() const {
  std::vector<KubeWatchStats> out;
  for (const std::unique_ptr<Pool>& pool : pools_)
    pool->AppendStats(&out);
  return out;
}

absl::StatusOr<std::unique_ptr<kube::ListWatchClient>> KubePoolResolver::DefaultClient(
    const kube::KubeConfig& config) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<kube::ApiClient> client, kube::ApiClient::Create(config));
  return std::unique_ptr<kube::ListWatchClient>(std::move(client));
}

}  // namespace switchyard::router
