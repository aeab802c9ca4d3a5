// KubeConfig: where a Kubernetes API server is and how to authenticate to it, from a
// kubeconfig file (its current context) or from the in-cluster service account. A plain
// value; the functions are thread-safe.
//
// Supported from a kubeconfig: a cluster's server, certificate-authority (a file) or
// certificate-authority-data (base64 PEM), insecure-skip-tls-verify; a user's token or
// tokenFile, client-certificate / client-key (files) or their -data forms; the context's
// namespace. exec and auth-provider credential plugins are refused by name. Relative file
// paths are taken from the kubeconfig's folder, as kubectl does.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::kube {

struct KubeConfig {
  std::string server;  // https://host:port[/prefix], no trailing '/'
  // The CA that signs the server's certificate: a PEM file, or PEM bytes; neither: the
  // system's trust store.
  std::string ca_file;
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  // A bearer token, fixed or read from a file (re-read when it changes: bound service
  // account tokens rotate). At most one of the two.
  std::string token;
  std::string token_file;
  // A client certificate and key (PEM), each a file or the bytes.
  std::string client_cert_file;
  std::string client_cert_pem;
  std::string client_key_file;
  std::string client_key_pem;
  std::string namespace_name = "default";
  // What the config came from, for messages ("kubeconfig PATH", "in-cluster").
  std::string source;
};

// Parses kubeconfig YAML text; `source` names it in errors and `base_dir` resolves relative
// file paths. Uses current-context (`context_override` when not empty).
absl::StatusOr<KubeConfig> ParseKubeconfig(std::string_view yaml, std::string_view source,
                                           const std::string& base_dir,
                                           const std::string& context_override = "");
absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path);

// The in-cluster config: server from KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT, the
// token, ca.crt and namespace from the service account folder (`account_dir`; the standard
// one by default). FailedPrecondition when not in a cluster.
inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";
absl::StatusOr<KubeConfig> InClusterConfig(std::string_view account_dir = kServiceAccountDir);

}  // namespace switchyard::kube
