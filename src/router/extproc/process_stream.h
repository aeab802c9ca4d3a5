// ProcessStream: one ext_proc Process stream (one HTTP request through the gateway), as
// ExtProcServer's header describes: it buffers the request, asks the PickBackend, answers with
// the pick (or the router's own answer), then passes the response through while its
// PickedRequest observes it.
//
// Threads: gRPC's reactions run on its callback threads, one read and one write outstanding
// at a time; the pick's answer may come on any thread. A mutex guards the state they share;
// gRPC's Start*/Finish run outside it (a reaction may run inline in them). The stream owns
// itself: it lives while gRPC holds it (until OnDone) and while a pick's answer may still
// come.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "grpcpp/support/server_callback.h"

#include "base/mutex.h"
#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"
#include "net/http_message.h"
#include "router/extproc/ext_proc_server.h"
#include "router/extproc/pick_backend.h"

namespace switchyard::router::extproc {

class ProcessStream final
    : public grpc::ServerBidiReactor<envoy::service::ext_proc::v3::ProcessingRequest,
                                     envoy::service::ext_proc::v3::ProcessingResponse>,
      public std::enable_shared_from_this<ProcessStream> {
 public:
  using Request = envoy::service::ext_proc::v3::ProcessingRequest;
  using Response = envoy::service::ext_proc::v3::ProcessingResponse;

  // A new stream, reading; gRPC holds the pointer until OnDone. `backend` and `options`
  // outlive it.
  static ProcessStream* Open(PickBackend* backend, const ExtProcServerOptions* options);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

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

  ProcessStream(PickBackend* backend, const ExtProcServerOptions* options);
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

  PickBackend* const backend_;
  const ExtProcServerOptions* const options_;
  // Kept until OnDone: gRPC's hold on the stream.
  std::shared_ptr<ProcessStream> self_;
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
