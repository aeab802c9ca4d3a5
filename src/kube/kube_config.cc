#include "kube/kube_config.h"

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

#include "base/config.h"
#include "base/file.h"
#include "base/status_macros.h"

namespace switchyard::kube {
namespace {

absl::Status Bad(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", where, what));
}

// The entry of the list `key` (clusters, users, contexts) named `name`, its `inner` map.
absl::StatusOr<YAML::Node> Named(const YAML::Node& root, const char* key, const char* inner,
                                 const std::string& name, std::string_view source) {
  const YAML::Node list = root[key];
  if (list && !list.IsSequence())
    return Bad(source, fmt::format("{} must be a list", key));
  for (size_t i = 0; list && i < list.size(); ++i) {
    if (!list[i].IsMap())
      return Bad(source, fmt::format("{}[{}] must be a map", key, i));
    SY_ASSIGN_OR_RETURN(std::string n, base::YamlField<std::string>(list[i], "name", ""));
    if (n != name)
      continue;
    const YAML::Node value = list[i][inner];
    if (!value || !value.IsMap())
      return Bad(source, fmt::format("{} '{}' has no {} map", key, name, inner));
    return value;
  }
  return Bad(source, fmt::format("no {} entry named '{}'", key, name));
}

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || std::filesystem::path(path).is_absolute() || base_dir.empty())
    return path;
  return (std::filesystem::path(base_dir) / path).string();
}

// `key` (a file path) and `key`-data (base64) of `node`: at most one, into *file or *pem.
absl::Status FileOrData(const YAML::Node& node, const std::string& key, const std::string& base_dir,
                        std::string_view where, std::string* file, std::string* pem) {
  SY_ASSIGN_OR_RETURN(std::string path, base::YamlField<std::string>(node, key, ""));
  SY_ASSIGN_OR_RETURN(std::string data, base::YamlField<std::string>(node, key + "-data", ""));
  if (!path.empty() && !data.empty())
    return Bad(where, fmt::format("give {} or {}-data, not both", key, key));
  *file = Resolve(path, base_dir);
  if (!data.empty() && !absl::Base64Unescape(data, pem))
    return Bad(where, fmt::format("{}-data is not base64", key));
  return absl::OkStatus();
}

absl::StatusOr<KubeConfig> Parse(const YAML::Node& root, std::string_view source,
                                 const std::string& base_dir, const std::string& context_override) {
  if (!root.IsMap())
    return Bad(source, "not a YAML map");
  KubeConfig c;
  c.source = fmt::format("kubeconfig {}", source);
  std::string context_name = context_override;
  if (context_name.empty()) {
    SY_ASSIGN_OR_RETURN(context_name, base::YamlField<std::string>(root, "current-context", ""));
  }
  if (context_name.empty())
    return Bad(source, "no current-context");
  SY_ASSIGN_OR_RETURN(YAML::Node context, Named(root, "contexts", "context", context_name, source));
  SY_ASSIGN_OR_RETURN(std::string cluster_name,
                      base::YamlField<std::string>(context, "cluster", ""));
  SY_ASSIGN_OR_RETURN(std::string user_name, base::YamlField<std::string>(context, "user", ""));
  SY_ASSIGN_OR_RETURN(c.namespace_name,
                      base::YamlField<std::string>(context, "namespace", c.namespace_name));

  SY_ASSIGN_OR_RETURN(YAML::Node cluster, Named(root, "clusters", "cluster", cluster_name, source));
  const std::string cw = fmt::format("{}: cluster '{}'", source, cluster_name);
  SY_ASSIGN_OR_RETURN(c.server, base::YamlField<std::string>(cluster, "server", ""));
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0)
    return Bad(cw, "server must be an http(s):// URL");
  while (c.server.back() == '/')
    c.server.pop_back();
  SY_RETURN_IF_ERROR(
      FileOrData(cluster, "certificate-authority", base_dir, cw, &c.ca_file, &c.ca_pem));
  SY_ASSIGN_OR_RETURN(c.insecure_skip_tls_verify,
                      base::YamlField<bool>(cluster, "insecure-skip-tls-verify", false));

  if (user_name.empty())
    return c;
  SY_ASSIGN_OR_RETURN(YAML::Node user, Named(root, "users", "user", user_name, source));
  const std::string uw = fmt::format("{}: user '{}'", source, user_name);
  for (const char* plugin : {"exec", "auth-provider"}) {
    if (user[plugin])
      return Bad(uw, fmt::format("{} credential plugins are not supported; give a token, "
                                 "tokenFile or a client certificate",
                                 plugin));
  }
  SY_ASSIGN_OR_RETURN(c.token, base::YamlField<std::string>(user, "token", ""));
  SY_ASSIGN_OR_RETURN(std::string token_file, base::YamlField<std::string>(user, "tokenFile", ""));
  if (!c.token.empty() && !token_file.empty())
    return Bad(uw, "give token or tokenFile, not both");
  c.token_file = Resolve(token_file, base_dir);
  SY_RETURN_IF_ERROR(FileOrData(user, "client-certificate", base_dir, uw, &c.client_cert_file,
                                &c.client_cert_pem));
  SY_RETURN_IF_ERROR(
      FileOrData(user, "client-key", base_dir, uw, &c.client_key_file, &c.client_key_pem));
  const bool has_cert = !c.client_cert_file.empty() || !c.client_cert_pem.empty();
  const bool has_key = !c.client_key_file.empty() || !c.client_key_pem.empty();
  if (has_cert != has_key)
    return Bad(uw, "a client certificate needs its key and a key its certificate");
  return c;
}

}  // namespace

absl::StatusOr<KubeConfig> ParseKubeconfig(std::string_view yaml, std::string_view source,
                                           const std::string& base_dir,
                                           const std::string& context_override) {
  SY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(yaml, source));
  try {
    return Parse(root, source, base_dir, context_override);
  } catch (const YAML::Exception& e) {
    return Bad(source, e.what());
  }
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path) {
  SY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return ParseKubeconfig(text, path, std::filesystem::path(path).parent_path().string());
}

absl::StatusOr<KubeConfig> InClusterConfig(std::string_view account_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return absl::FailedPreconditionError(
        "not in a Kubernetes cluster (KUBERNETES_SERVICE_HOST/PORT unset); give a kubeconfig");
  }
  KubeConfig c;
  c.source = "in-cluster";
  const std::string h(host);
  c.server = h.find(':') == std::string::npos ? fmt::format("https://{}:{}", h, port)
                                              : fmt::format("https://[{}]:{}", h, port);
  const std::filesystem::path dir(account_dir);
  c.token_file = (dir / "token").string();
  c.ca_file = (dir / "ca.crt").string();
  if (absl::StatusOr<std::string> ns = base::ReadFile((dir / "namespace").string()); ns.ok()) {
    while (!ns->empty() && (ns->back() == '\n' || ns->back() == ' '))
      ns->pop_back();
    if (!ns->empty())
      c.namespace_name = *std::move(ns);
  }
  return c;
}

}  // namespace switchyard::kube
