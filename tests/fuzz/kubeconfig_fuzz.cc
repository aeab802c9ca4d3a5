// Fuzz target: bytes as a kubeconfig (kube/kube_config.h). It may be refused, never crash; an
// accepted one has an http(s) server without a trailing '/', and a client certificate only
// with its key.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kube/kube_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<switchyard::kube::KubeConfig> c =
      switchyard::kube::ParseKubeconfig(text, "fuzz", "/nonexistent");
  if (!c.ok())
    return 0;
  if (c->server.rfind("http", 0) != 0 || c->server.back() == '/')
    std::abort();
  const bool cert = !c->client_cert_file.empty() || !c->client_cert_pem.empty();
  const bool key = !c->client_key_file.empty() || !c->client_key_pem.empty();
  if (cert != key)
    std::abort();
  return 0;
}
