// ProcessStream: one ext_proc Process stream (one HTTP request through the gateway), as
// ExtProcServer's header describes: it buffers the request, asks the PickBackend, answers with
// the pick (or the router's own answer), then passes the response through while its
// PickedRequest observes it.
//
// Threads: it runs on gRPC's asynchronous API. Each stream belongs to one completion queue,
// whose one thread runs its completions (CompletionTag::Complete), one read and one write
// outstanding at a time; the pick's answer may come on any thread. A mutex guards the state
// they share; gRPC's Read/Write/Finish are started outside it. The stream lives while any of
// its operations is outstanding in gRPC (CallOperation) and while a pick's answer may still
// come; its end releases its request.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_stream.h"

#include "base/mutex.h"
#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "net/http_message.h"
#include "router/extproc/completion_queues.h"
#include "router/extproc/completion_tag.h"
#include "router/extproc/ext_proc_server.h"
#include "router/extproc/pick_backend.h"

namespace switchyard::router::extproc {

class ProcessStream final : public std::enable_shared_from_this<ProcessStream> {
 public:
  using Request = envoy::service::ext_proc::v3::ProcessingRequest;
  using Response = envoy::service::ext_proc::v3::ProcessingResponse;
  using Service = envoy::service::ext_proc::v3::ExternalProcessor::AsyncService;

  // Asks `service` for the next Process call on `queue` (one of `queues`); when one comes,
  // its stream reads and asks again, so one call is always awaited per queue (until the
  // server shuts down). `service`, `queues`, `backend` and `options` outlive the streams.
  static void Await(Service* service, CompletionQueues* queues, grpc::ServerCompletionQueue* queue,
                    PickBackend* backend, const ExtProcServerOptions* options);

 private:
  // Where the request stands.
  enum class Phase {
    kHeaders,      // waiting for request_headers
    kBody,         // buffering request_body chunks
    kPicking,      // the backend has it
    kRouted,       // picked: the response passes through
    kPassThrough,  // failed open: everything passes through unchanged
    kAnswered,     // an immediate response went out
  };
  // What to do once the lock is released.
  struct Actions {
    const Response* write = nullptr;
    bool finish = false;
    grpc::Status status;
    std::unique_ptr<PickedRequest> released;  // the request's end, outside the lock
    std::function<void()> cancel_pick;
  };

  ProcessStream(Service* service, CompletionQueues* queues, grpc::ServerCompletionQueue* queue,
                PickBackend* backend, const ExtProcServerOptions* options);
  // Completions of the call's arrival, a read, a write, the Finish, and the call's end
  // (ServerContext::AsyncNotifyWhenDone: finished or cancelled).
  void OnCall(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone(bool ok);
  void OnCallDone(bool ok);
  // The client cancelled (or the server is shutting down): the request is over.
  void OnCancel();
  void StartRead();
  void StartWrite(const Response* response);
  void Finish(const grpc::Status& status);
  // Takes one message; returns false when the stream must end with `*error`.
  bool Handle(Request& message, grpc::Status* error);
  // The request is whole: the backend has it.
  void BeginPick();
  void Picked(PickOutcome outcome);
  // The answers to a pick.
  void QueueRouted(const PickedRequest& picked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueAnswer(const DirectAnswer& answer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Failed open: the request as it came, without a destination.
  void QueuePassThrough() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a request body re-sent in chunks (empty: none had come).
  void QueueBody(const std::string& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Queue(Response response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next write, or the Finish that is due, into `actions`.
  void Next(Actions* actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(Actions actions);

  Service* const service_;
  CompletionQueues* const queues_;
  grpc::ServerCompletionQueue* const queue_;
  PickBackend* const backend_;
  const ExtProcServerOptions* const options_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<Response, Request> stream_{&context_};
  CallOperation<ProcessStream> call_op_{this, &ProcessStream::OnCall};
  CallOperation<ProcessStream> read_op_{this, &ProcessStream::OnReadDone};
  CallOperation<ProcessStream> write_op_{this, &ProcessStream::OnWriteDone};
  CallOperation<ProcessStream> finish_op_{this, &ProcessStream::OnFinishDone};
  CallOperation<ProcessStream> done_op_{this, &ProcessStream::OnCallDone};
  // Read side only (one read at a time).
  Request incoming_;
  net::HttpRequest request_;
  std::string body_;
  bool has_body_ = false;
  bool event_stream_ = false;

  base::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kHeaders;
  // Kept for a fail-open pass-through (the backend took the request's own).
  std::string pass_through_body_ ABSL_GUARDED_BY(mu_);
  bool trailers_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<PickedRequest> picked_ ABSL_GUARDED_BY(mu_);
  std::function<void()> cancel_pick_ ABSL_GUARDED_BY(mu_);
  std::deque<Response> writes_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_when_written_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace switchyard::router::extproc
