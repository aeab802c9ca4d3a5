#include "kube/api_client.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <functional>
#include <mutex>
#include <utility>

#include "fmt/format.h"

#include "base/file.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kube {
namespace {

constexpr long kConnectTimeoutMs = 5000;
constexpr long kListTimeoutS = 60;
// A watch may run this much past the timeout it asked the server for before we give up on
// a silent connection.
constexpr long kWatchGraceS = 30;
constexpr size_t kMaxErrorBodyBytes = 64 << 10;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Escape(CURL* easy, const std::string& text) {
  char* escaped = curl_easy_escape(easy, text.data(), static_cast<int>(text.size()));
  std::string out = escaped != nullptr ? escaped : "";
  curl_free(escaped);
  return out;
}

// The message of a metav1.Status body, or the body itself (cut short) when it is not one.
std::string ServerMessage(const std::string& body) {
  if (absl::StatusOr<std::unique_ptr<base::JsonDocument>> doc =
          base::JsonDocument::Parse(body, "status");
      doc.ok()) {
    absl::StatusOr<std::string> message = base::FieldOr<std::string>(
        (*doc)->root(), "message", std::string(), base::JsonPath("status"));
    if (message.ok() && !message->empty())
      return *std::move(message);
  }
  return body.substr(0, 200);
}

absl::Status HttpError(long code, const std::string& body, const std::string& what) {
  const std::string message = fmt::format("{}: HTTP {}: {}", what, code, ServerMessage(body));
  switch (code) {
    case 401:
      return absl::UnauthenticatedError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 410:
      return absl::Status(kGoneCode, message);
    default:
      return code >= 500 ? absl::UnavailableError(message) : absl::InvalidArgumentError(message);
  }
}

}  // namespace

// One request: the easy handle, what it collected, and how it ended.
struct ApiClient::Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string what;  // "GET <url>" for messages
  long http_code = 0;
  std::string body;  // a list's body, or an error answer's
  // Watches: each complete line goes to on_event; `pending` holds a partial one.
  const EventFn* on_event = nullptr;
  std::string pending;
  absl::Status status;  // the first failure (a bad line, on_event's error)

  ~Transfer() {
    curl_slist_free_all(headers);
    if (easy != nullptr)
      curl_easy_cleanup(easy);
  }

  size_t Write(const char* data, size_t size) {
    if (http_code == 0)
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http_code);
    if (on_event == nullptr || http_code != 200) {
      if (on_event != nullptr && body.size() + size > kMaxErrorBodyBytes)
        return size;  // an error answer's tail is not needed
      body.append(data, size);
      return size;
    }
    pending.append(data, size);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string_view line(pending.data() + start, nl - start);
      if (line.find_first_not_of(" \r\t") == std::string_view::npos)
        continue;
      absl::StatusOr<WatchEvent> event = DecodeWatchEvent(line);
      status = event.ok() ? (*on_event)(*std::move(event)) : event.status();
      if (!status.ok())
        return 0;  // ends the transfer (CURLE_WRITE_ERROR)
    }
    pending.erase(0, start);
    if (pending.size() > kMaxLineBytes) {
      status = absl::ResourceExhaustedError(
          fmt::format("{}: a watch event longer than {} bytes", what, kMaxLineBytes));
      return 0;
    }
    return size;
  }

  static size_t WriteCallback(char* data, size_t size, size_t count, void* self) {
    return static_cast<Transfer*>(self)->Write(data, size * count);
  }
};

absl::StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(KubeConfig config) {
  GlobalInit();
  CURLM* multi = curl_multi_init();
  if (multi == nullptr)
    return absl::InternalError("curl_multi_init failed");
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(config), multi));
}

ApiClient::ApiClient(KubeConfig config, void* multi) : config_(std::move(config)), multi_(multi) {}

ApiClient::~ApiClient() {
  curl_multi_cleanup(multi_);
}

void ApiClient::Interrupt() {
  interrupted_.store(true);
  curl_multi_wakeup(multi_);
}

absl::StatusOr<std::string> ApiClient::Authorization() {
  if (!config_.token.empty())
    return "Bearer " + config_.token;
  if (config_.token_file.empty())
    return std::string();
  struct stat st = {};
  if (::stat(config_.token_file.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("{}: cannot read the token file {}", config_.source, config_.token_file));
  }
  if (file_token_size_ != st.st_size || file_token_mtime_.tv_sec != st.st_mtim.tv_sec ||
      file_token_mtime_.tv_nsec != st.st_mtim.tv_nsec) {
    SY_ASSIGN_OR_RETURN(std::string token, base::ReadFile(config_.token_file));
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
      token.pop_back();
    file_token_ = std::move(token);
    file_token_mtime_ = st.st_mtim;
    file_token_size_ = st.st_size;
  }
  return "Bearer " + file_token_;
}

void ApiClient::Perform(Transfer& transfer) {
  if (interrupted_.load()) {
    transfer.status = absl::CancelledError("interrupted");
    return;
  }
  curl_multi_add_handle(multi_, transfer.easy);
  CURLcode result = CURLE_OK;
  bool done = false;
  while (!done) {
    int running = 0;
    curl_multi_perform(multi_, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == transfer.easy) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done)
      break;
    if (interrupted_.load()) {
      curl_multi_remove_handle(multi_, transfer.easy);
      transfer.status = absl::CancelledError("interrupted");
      return;
    }
    curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
  }
  curl_multi_remove_handle(multi_, transfer.easy);
  curl_easy_getinfo(transfer.easy, CURLINFO_RESPONSE_CODE, &transfer.http_code);
  if (!transfer.status.ok())
    return;  // a bad line or the caller's error ended it
  if (result != CURLE_OK) {
    transfer.status = absl::UnavailableError(
        fmt::format("{} ({}): {}", transfer.what, config_.source, curl_easy_strerror(result)));
    return;
  }
  if (transfer.http_code != 200)
    transfer.status = HttpError(transfer.http_code, transfer.body,
                                fmt::format("{} ({})", transfer.what, config_.source));
}

namespace {

// The query string of `query` plus `extra` ("k=v" pairs, already escaped).
std::string QueryString(CURL* easy, const ResourceQuery& query,
                        std::initializer_list<std::string> extra) {
  std::string out;
  auto add = [&out](const std::string& pair) {
    out += out.empty() ? '?' : '&';
    out += pair;
  };
  if (!query.label_selector.empty())
    add("labelSelector=" + Escape(easy, query.label_selector));
  if (!query.field_selector.empty())
    add("fieldSelector=" + Escape(easy, query.field_selector));
  for (const std::string& pair : extra)
    add(pair);
  return out;
}

}  // namespace

absl::StatusOr<ObjectList> ApiClient::List(const ResourceQuery& query) {
  Transfer transfer;
  SY_ASSIGN_OR_RETURN(std::string authorization, Authorization());
  transfer.easy = curl_easy_init();
  if (transfer.easy == nullptr)
    return absl::InternalError("curl_easy_init failed");
  const std::string url = config_.server + query.path + QueryString(transfer.easy, query, {});
  transfer.what = "GET " + url;
  SY_RETURN_IF_ERROR(Setup(transfer, url, authorization, kListTimeoutS));
  Perform(transfer);
  SY_RETURN_IF_ERROR(transfer.status);
  absl::StatusOr<ObjectList> list = DecodeObjectList(transfer.body);
  if (!list.ok())
    return absl::UnavailableError(
        fmt::format("{}: {}", transfer.what, std::string(list.status().message())));
  return list;
}

absl::Status ApiClient::Watch(const ResourceQuery& query, const std::string& resource_version,
                              int timeout_seconds, const EventFn& on_event) {
  Transfer transfer;
  SY_ASSIGN_OR_RETURN(std::string authorization, Authorization());
  transfer.easy = curl_easy_init();
  if (transfer.easy == nullptr)
    return absl::InternalError("curl_easy_init failed");
  transfer.on_event = &on_event;
  const std::string url = config_.server + query.path +
                          QueryString(transfer.easy, query,
                                      {"watch=1", "allowWatchBookmarks=true",
                                       "resourceVersion=" + Escape(transfer.easy, resource_version),
                                       fmt::format("timeoutSeconds={}", timeout_seconds)});
  transfer.what = "watch " + url;
  SY_RETURN_IF_ERROR(Setup(transfer, url, authorization, timeout_seconds + kWatchGraceS));
  Perform(transfer);
  return transfer.status;
}

absl::Status ApiClient::Setup(Transfer& transfer, const std::string& url,
                              const std::string& authorization, long timeout_s) {
  CURL* easy = transfer.easy;
  transfer.headers = curl_slist_append(transfer.headers, "Accept: application/json");
  if (!authorization.empty()) {
    transfer.headers =
        curl_slist_append(transfer.headers, ("Authorization: " + authorization).c_str());
  }
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer.headers);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "switchyard");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Transfer::WriteCallback);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  // Blobs are copied by libcurl (CURL_BLOB_COPY).
  auto blob = [easy](CURLoption option, const std::string& pem) {
    curl_blob b = {const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
    return curl_easy_setopt(easy, option, &b);
  };
  CURLcode rc = CURLE_OK;
  if (!config_.ca_file.empty())
    rc = curl_easy_setopt(easy, CURLOPT_CAINFO, config_.ca_file.c_str());
  else if (!config_.ca_pem.empty())
    rc = blob(CURLOPT_CAINFO_BLOB, config_.ca_pem);
  if (rc == CURLE_OK && !config_.client_cert_file.empty())
    rc = curl_easy_setopt(easy, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  else if (rc == CURLE_OK && !config_.client_cert_pem.empty())
    rc = blob(CURLOPT_SSLCERT_BLOB, config_.client_cert_pem);
  if (rc == CURLE_OK && !config_.client_key_file.empty())
    rc = curl_easy_setopt(easy, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  else if (rc == CURLE_OK && !config_.client_key_pem.empty())
    rc = blob(CURLOPT_SSLKEY_BLOB, config_.client_key_pem);
  if (rc != CURLE_OK) {
    return absl::FailedPreconditionError(fmt::format("{}: libcurl refused the TLS settings: {}",
                                                     config_.source, curl_easy_strerror(rc)));
  }
  return absl::OkStatus();
}

}  // namespace switchyard::kube
