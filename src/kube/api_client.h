// ApiClient: a ListWatchClient over HTTPS to a Kubernetes API server, through libcurl: the
// cluster's CA (file or bytes) or insecure-skip-tls-verify, a bearer token (a token file is
// re-read whenever it changes, for rotating service-account tokens) or a client certificate.
// A watch is read as it streams, one newline-delimited JSON event at a time.
//
// Errors: the server's Status message with the HTTP code mapped (401 Unauthenticated, 403
// PermissionDenied, 404 NotFound, 410 kGoneCode, 5xx and transport failures Unavailable);
// the message names the server and the config it came from.
//
// Threads: as ListWatchClient (one calling thread; Interrupt from any, which wakes the
// transfer's poll at once).
#pragma once

#include <atomic>
#include <ctime>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "kube/kube_config.h"
#include "kube/list_watch_client.h"

namespace switchyard::kube {

class ApiClient : public ListWatchClient {
 public:
  static absl::StatusOr<std::unique_ptr<ApiClient>> Create(KubeConfig config);
  ~ApiClient() override;
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  absl::StatusOr<ObjectList> List(const ResourceQuery& query) override;
  absl::Status Watch(const ResourceQuery& query, const std::string& resource_version,
                     int timeout_seconds, const EventFn& on_event) override;
  void Interrupt() override;

  // The longest watch line accepted (one object); longer is an error.
  static constexpr size_t kMaxLineBytes = 64 << 20;

 private:
  struct Transfer;
  ApiClient(KubeConfig config, void* multi);

  // The Authorization header's value, "" for none; re-reads config_.token_file when its
  // modification time or size changed.
  absl::StatusOr<std::string> Authorization();
  // Sets the request's URL, headers, timeouts and TLS options.
  absl::Status Setup(Transfer& transfer, const std::string& url, const std::string& authorization,
                     long timeout_s);
  // Runs `transfer` to its end (or an interrupt); fills its status.
  void Perform(Transfer& transfer);

  const KubeConfig config_;
  void* const multi_;  // CURLM*
  std::atomic<bool> interrupted_{false};
  std::string file_token_;
  std::timespec file_token_mtime_ = {};
  long file_token_size_ = -1;
};

}  // namespace switchyard::kube
