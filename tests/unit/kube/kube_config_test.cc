#include "kube/kube_config.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

#include "base/file.h"

namespace switchyard::kube {
namespace {

constexpr char kKubeconfig[] = R"(apiVersion: v1
kind: Config
current-context: test
contexts:
- name: other
  context: {cluster: far, user: nobody}
- name: test
  context: {cluster: local, user: admin, namespace: llm}
clusters:
- name: far
  cluster: {server: "https://far:6443"}
- name: local
  cluster:
    server: "https://127.0.0.1:6443/"
    certificate-authority: certs/ca.crt
users:
- name: nobody
  user: {}
- name: admin
  user: {token: secret-token}
)";

TEST(KubeconfigTest, ReadsTheCurrentContext) {
  absl::StatusOr<KubeConfig> c = ParseKubeconfig(kKubeconfig, "kc.yaml", "/etc/kube");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_file, "/etc/kube/certs/ca.crt");
  EXPECT_EQ(c->token, "secret-token");
  EXPECT_EQ(c->namespace_name, "llm");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->source, "kubeconfig kc.yaml");
}

TEST(KubeconfigTest, ContextOverrideAndDefaultNamespace) {
  absl::StatusOr<KubeConfig> c = ParseKubeconfig(kKubeconfig, "kc.yaml", "/etc/kube", "other");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://far:6443");
  EXPECT_EQ(c->namespace_name, "default");
  EXPECT_TRUE(c->token.empty());
}

TEST(KubeconfigTest, DecodesDataFieldsAndClientCertificates) {
  const std::string ca = absl::Base64Escape("-----BEGIN CERTIFICATE-----\nca\n");
  const std::string cert = absl::Base64Escape("cert-pem");
  const std::string key = absl::Base64Escape("key-pem");
  const std::string yaml =
      "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
      "clusters: [{name: k, cluster: {server: 'https://h:1', "
      "certificate-authority-data: " +
      ca + ", insecure-skip-tls-verify: true}}]\n" +
      "users: [{name: u, user: {client-certificate-data: " + cert + ", client-key-data: " + key +
      "}}]\n";
  absl::StatusOr<KubeConfig> c = ParseKubeconfig(yaml, "kc", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_pem, "-----BEGIN CERTIFICATE-----\nca\n");
  EXPECT_TRUE(c->ca_file.empty());
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->client_cert_pem, "cert-pem");
  EXPECT_EQ(c->client_key_pem, "key-pem");
}

TEST(KubeconfigTest, ErrorsNameWhatIsWrong) {
  auto error = [](const std::string& yaml) {
    absl::StatusOr<KubeConfig> c = ParseKubeconfig(yaml, "kc", "");
    EXPECT_FALSE(c.ok());
    return std::string(c.status().message());
  };
  const std::string head =
      "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n";
  const std::string cluster = "clusters: [{name: k, cluster: {server: 'https://h:1'}}]\n";
  EXPECT_NE(error("[1, 2]").find("not a YAML map"), std::string::npos);
  EXPECT_NE(error("contexts: []").find("no current-context"), std::string::npos);
  EXPECT_NE(error(head).find("no clusters entry named 'k'"), std::string::npos);
  EXPECT_NE(error(head + "clusters: [{name: k, cluster: {server: 'h:1'}}]\n").find("http(s)://"),
            std::string::npos);
  EXPECT_NE(error(head + cluster + "users: [{name: u, user: {exec: {command: x}}}]\n")
                .find("exec credential plugins are not supported"),
            std::string::npos);
  EXPECT_NE(error(head + cluster + "users: [{name: u, user: {token: a, tokenFile: b}}]\n")
                .find("token or tokenFile"),
            std::string::npos);
  EXPECT_NE(error(head + cluster + "users: [{name: u, user: {client-certificate: a}}]\n")
                .find("needs its key"),
            std::string::npos);
  EXPECT_NE(error(head + "clusters: [{name: k, cluster: {server: 'https://h', "
                         "certificate-authority-data: '!!!'}}]\n")
                .find("not base64"),
            std::string::npos);
}

TEST(InClusterConfigTest, ReadsTheServiceAccount) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sy_kube_sa_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(base::WriteFile((dir / "namespace").string(), "serving\n").ok());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(InClusterConfig(dir.string()).status().code(), absl::StatusCode::kFailedPrecondition);
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  absl::StatusOr<KubeConfig> c = InClusterConfig(dir.string());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->token_file, (dir / "token").string());
  EXPECT_EQ(c->ca_file, (dir / "ca.crt").string());
  EXPECT_EQ(c->namespace_name, "serving");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace switchyard::kube
