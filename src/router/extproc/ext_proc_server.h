// ExtProcServer: the Endpoint Picker Protocol, llm-d's EPP's side of it: Envoy's
// `envoy.service.ext_proc.v3.ExternalProcessor/Process` over gRPC, with request and response
// bodies in FULL_DUPLEX_STREAMED mode. Per stream (one HTTP request through the gateway):
//
//   - request_headers, then request_body chunks, buffered until end_of_stream (a request
//     whose headers end the stream has an empty body); then the PickBackend admits and
//     schedules it, and the answer is a headers response that sets
//     x-gateway-destination-endpoint (and content-length) and clears the route cache,
//     dynamic metadata {"envoy.lb": {"x-gateway-destination-endpoint": "ip:port"}}, and the
//     body re-sent as streamed body mutations of at most 62,000 bytes (body_chunks.h);
//   - the router's own answer (a refusal, no endpoint: 429) as an immediate_response;
//   - response_headers and response_body chunks are observed (PickedRequest) and passed on
//     unchanged (headers: an empty mutation; body: each chunk re-sent as it came);
//   - the request ends (its endpoint's in-flight count and the rest released) at the
//     response's end_of_stream, its trailers, or the stream's end or cancellation.
//
// An internal error (a message out of the protocol's order, a pick that fails inside the
// router: 500) is answered as `fail_open` says: closed, an immediate 503; open, the request
// goes on unchanged without a destination (the gateway's own routing then decides).
//
// The gRPC health service (grpc.health.v1.Health, Check and Watch: the empty service name,
// "liveness", "readiness" and the ext_proc service's name) is on `health_port`, and on `port`
// too; SERVING once SetServing(true). Other methods are UNIMPLEMENTED.
//
// Threads: gRPC's asynchronous API, on threads of the server's own, each running one
// completion queue (completion_queues.h): a stream's messages are read, picked and answered
// on its queue's thread; a pick's answer may come on a flow control thread. Nothing runs on
// gRPC's callback API, whose threads (two or more, each polling every socket of the process)
// would hand each event over between threads. Start/Stop from one controlling thread;
// SetServing from any.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "router/extproc/pick_backend.h"

namespace switchyard::router::extproc {

struct ExtProcServerOptions {
  std::string host = "0.0.0.0";
  int port = 9002;       // 0: a free one
  int health_port = -1;  // -1: none of its own
  bool fail_open = false;
  // The streams' threads. gRPC's poller on Linux (epoll1) has every polling thread wait on
  // the process's one epoll set, so a second thread mostly takes events for the first's
  // streams and hands them over: more than 1 pays only past one core of picks.
  int threads = 1;
  // The largest request body buffered for a pick; past it the answer is 413.
  size_t max_body_bytes = 64 << 20;
};

class ExtProcServer {
 public:
  // `backend` must outlive the server.
  static absl::StatusOr<std::unique_ptr<ExtProcServer>> Start(const ExtProcServerOptions& options,
                                                              PickBackend* backend);
  virtual ~ExtProcServer() = default;
  virtual int port() const = 0;
  virtual int health_port() const = 0;  // -1: none
  virtual void SetServing(bool serving) = 0;
  // Cancels the streams still open and stops both servers. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace switchyard::router::extproc
