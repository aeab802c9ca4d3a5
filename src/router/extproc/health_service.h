// grpc.health.v1.Health (Check and Watch) as gRPC's default health service answers it, but on
// the ext_proc server's own completion queues (CompletionQueues): gRPC's default one runs on
// its callback API, whose threads would poll the process's sockets and hand the ext_proc
// streams' events over between threads. Served on a server's generic service: the names in
// HealthStatus are SERVING or NOT_SERVING as it says, any other is NOT_FOUND to Check and
// SERVICE_UNKNOWN to Watch; every other method the generic service gets is UNIMPLEMENTED.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/support/byte_buffer.h"

#include "base/mutex.h"
#include "router/extproc/completion_queues.h"
#include "router/extproc/completion_tag.h"

namespace switchyard::router::extproc {

class HealthCall;

// Whether the server is serving, for the empty service name (the whole server), llm-d's EPP's
// probes' ("liveness", "readiness") and the ext_proc service's; and the Watch calls to tell
// when it changes. Any thread.
class HealthStatus {
 public:
  // HealthCheckResponse.ServingStatus values.
  static constexpr int kServing = 1;
  static constexpr int kNotServing = 2;
  static constexpr int kServiceUnknown = 3;

  void Set(bool serving);
  int Of(std::string_view service) const;

  // A Watch call, told of each change until removed.
  void AddWatch(std::shared_ptr<HealthCall> call);
  void RemoveWatch(const HealthCall* call);

 private:
  mutable base::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<HealthCall>> watches_ ABSL_GUARDED_BY(mu_);
};

// One call on the generic service (CallOperation owns it while gRPC has any of its operations).
class HealthCall final : public std::enable_shared_from_this<HealthCall> {
 public:
  // Asks `service` for its next call on `queue` (one of `queues`); when one comes, it asks
  // again. `service`, `queues` and `status` outlive the calls.
  static void Await(grpc::AsyncGenericService* service, CompletionQueues* queues,
                    grpc::ServerCompletionQueue* queue, HealthStatus* status);

  // A Watch's status may have changed: sends it if it did.
  void SendLatest();

 private:
  HealthCall(grpc::AsyncGenericService* service, CompletionQueues* queues,
             grpc::ServerCompletionQueue* queue, HealthStatus* status)
      : service_(service), queues_(queues), queue_(queue), status_(status) {}
  void OnCall(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone(bool ok);
  void OnCallDone(bool ok);
  void Finish(const grpc::Status& status);

  grpc::AsyncGenericService* const service_;
  CompletionQueues* const queues_;
  grpc::ServerCompletionQueue* const queue_;
  HealthStatus* const status_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_{&context_};
  grpc::ByteBuffer request_;
  std::string service_name_;  // set once read, before any write
  CallOperation<HealthCall> call_op_{this, &HealthCall::OnCall};
  CallOperation<HealthCall> read_op_{this, &HealthCall::OnReadDone};
  CallOperation<HealthCall> write_op_{this, &HealthCall::OnWriteDone};
  CallOperation<HealthCall> finish_op_{this, &HealthCall::OnFinishDone};
  CallOperation<HealthCall> done_op_{this, &HealthCall::OnCallDone};

  // A Watch's writes: one at a time, each the status as it is when it starts.
  base::Mutex mu_;
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);
  int sent_ ABSL_GUARDED_BY(mu_) = 0;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace switchyard::router::extproc
