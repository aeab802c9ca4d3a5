#include "router/extproc/process_stream.h"

#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

#include "router/extproc/body_chunks.h"
#include "router/extproc/header_map.h"

namespace switchyard::router::extproc {
namespace {

namespace pb = envoy::service::ext_proc::v3;
namespace core = envoy::config::core::v3;

constexpr char kDestinationHeader[] = "x-gateway-destination-endpoint";
constexpr char kLbNamespace[] = "envoy.lb";

void SetHeader(pb::HeaderMutation* mutation, std::string_view name, std::string_view value) {
  core::HeaderValueOption* option = mutation->add_set_headers();
  option->mutable_header()->set_key(std::string(name));
  option->mutable_header()->set_raw_value(std::string(value));
  option->set_append_action(core::HeaderValueOption::OVERWRITE_IF_EXISTS_OR_ADD);
}

// The first header of that (lower-case) name in Envoy's map.
std::string_view HeaderOf(const core::HeaderMap& headers, std::string_view name) {
  for (const core::HeaderValue& header : headers.headers()) {
    if (header.key() == name)
      return header.raw_value().empty() ? header.value() : header.raw_value();
  }
  return {};
}

pb::ProcessingResponse BodyChunk(pb::ProcessingResponse::ResponseCase side, std::string_view chunk,
                                 bool end_of_stream) {
  pb::ProcessingResponse response;
  pb::BodyResponse* body = side == pb::ProcessingResponse::kRequestBody
                               ? response.mutable_request_body()
                               : response.mutable_response_body();
  pb::StreamedBodyResponse* streamed =
      body->mutable_response()->mutable_body_mutation()->mutable_streamed_response();
  streamed->set_body(std::string(chunk));
  streamed->set_end_of_stream(end_of_stream);
  return response;
}

}  // namespace

void ProcessStream::Await(Service* service, CompletionQueues* queues,
                          grpc::ServerCompletionQueue* queue, PickBackend* backend,
                          const ExtProcServerOptions* options) {
  std::shared_ptr<ProcessStream> stream(
      new ProcessStream(service, queues, queue, backend, options));
  stream->context_.AsyncNotifyWhenDone(stream->done_op_.Start());
  const bool requested = queues->Submit([&] {
    service->RequestProcess(&stream->context_, &stream->stream_, queue, queue,
                            stream->call_op_.Start());
  });
  if (!requested)
    stream->done_op_.Abandon();
}

ProcessStream::ProcessStream(Service* service, CompletionQueues* queues,
                             grpc::ServerCompletionQueue* queue, PickBackend* backend,
                             const ExtProcServerOptions* options)
    : service_(service), queues_(queues), queue_(queue), backend_(backend), options_(options) {}

void ProcessStream::OnCall(bool ok) {
  if (!ok) {  // the server is shutting down: no call came, and no end-of-call notice comes
    done_op_.Abandon();
    return;
  }
  Await(service_, queues_, queue_, backend_, options_);
  StartRead();
}

void ProcessStream::StartRead() {
  queues_->Submit([&] { stream_.Read(&incoming_, read_op_.Start()); });
}

void ProcessStream::StartWrite(const Response* response) {
  queues_->Submit([&] { stream_.Write(*response, write_op_.Start()); });
}

void ProcessStream::Finish(const grpc::Status& status) {
  queues_->Submit([&] { stream_.Finish(status, finish_op_.Start()); });
}

void ProcessStream::OnFinishDone(bool) {}

void ProcessStream::OnCallDone(bool) {
  if (context_.IsCancelled())
    OnCancel();
}

void ProcessStream::OnReadDone(bool ok) {
  grpc::Status error;
  if (ok && Handle(incoming_, &error)) {
    // A Finish that comes after the check (a pick's answer on another thread) ends this
    // read with nothing.
    {
      base::MutexLock lock(&mu_);
      if (finished_)
        return;
    }
    StartRead();
    return;
  }
  Actions actions;
  {
    base::MutexLock lock(&mu_);
    reads_done_ = true;
    if (!ok) {
      // Envoy closed its side: the request is over, however far its response got.
      actions.released = std::move(picked_);
    } else {
      finish_status_ = error;
      finish_when_written_ = true;
    }
    Next(&actions);
  }
  Run(std::move(actions));
}

bool ProcessStream::Handle(Request& message, grpc::Status* error) {
  Actions actions;
  bool pick = false;
  {
    base::MutexLock lock(&mu_);
    switch (message.request_case()) {
      case Request::kRequestHeaders:
        if (phase_ != Phase::kHeaders) {
          *error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_headers twice");
          return false;
        }
        request_ = RequestFromHeaders(message.request_headers().headers());
        phase_ = Phase::kBody;
        pick = message.request_headers().end_of_stream();
        break;
      case Request::kRequestBody: {
        if (phase_ == Phase::kPassThrough || phase_ == Phase::kAnswered)
          break;  // a late chunk of a request already answered
        if (phase_ != Phase::kBody) {
          *error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "request_body outside the request's body");
          return false;
        }
        has_body_ = true;
        const std::string& chunk = message.request_body().body();
        if (body_.size() + chunk.size() > options_->max_body_bytes) {
          QueueAnswer({413,
                       {},
                       fmt::format(R"({{"error":{{"message":"The request body is larger than )"
                                   R"({} bytes.","type":"invalid_request_error","code":413}}}})",
                                   options_->max_body_bytes)});
          break;
        }
        body_ += chunk;
        pick = message.request_body().end_of_stream();
        break;
      }
      case Request::kRequestTrailers:
        if (phase_ == Phase::kBody) {
          trailers_pending_ = true;  // answered after the body
          pick = true;
        } else if (phase_ == Phase::kPicking) {
          trailers_pending_ = true;
        } else {
          Queue([] {
            Response r;
            r.mutable_request_trailers();
            return r;
          }());
        }
        break;
      case Request::kResponseHeaders: {
        const core::HeaderMap& headers = message.response_headers().headers();
        event_stream_ = HeaderOf(headers, "content-type").starts_with("text/event-stream");
        int status = 0;
        const std::string_view code = HeaderOf(headers, ":status");
        if (picked_ != nullptr &&
            absl::SimpleAtoi(absl::string_view(code.data(), code.size()), &status))
          picked_->ResponseStatus(status);
        Response r;
        r.mutable_response_headers();
        Queue(std::move(r));
        if (message.response_headers().end_of_stream())
          actions.released = std::move(picked_);
        break;
      }
      case Request::kResponseBody: {
        const pb::HttpBody& body = message.response_body();
        if (picked_ != nullptr)
          picked_->ResponseBody(body.body(), event_stream_);
        Queue(BodyChunk(Response::kResponseBody, body.body(), body.end_of_stream()));
        if (body.end_of_stream())
          actions.released = std::move(picked_);
        break;
      }
      case Request::kResponseTrailers: {
        Response r;
        r.mutable_response_trailers();
        Queue(std::move(r));
        actions.released = std::move(picked_);
        break;
      }
      default:
        *error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown ext_proc message");
        return false;
    }
    if (pick) {
      phase_ = Phase::kPicking;
      if (options_->fail_open)
        pass_through_body_ = body_;
    }
    Next(&actions);
  }
  Run(std::move(actions));
  if (pick)
    BeginPick();
  return true;
}

void ProcessStream::BeginPick() {
  request_.body = std::move(body_);
  std::function<void()> cancel = backend_->Pick(
      std::move(request_),
      [self = shared_from_this()](PickOutcome outcome) { self->Picked(std::move(outcome)); });
  {
    base::MutexLock lock(&mu_);
    if (!cancelled_) {
      if (phase_ == Phase::kPicking)  // still picking: a later cancel of the stream uses it
        cancel_pick_ = std::move(cancel);
      return;
    }
  }
  if (cancel)  // the stream was cancelled while the pick began
    cancel();
}

void ProcessStream::Picked(PickOutcome outcome) {
  Actions actions;
  {
    base::MutexLock lock(&mu_);
    cancel_pick_ = nullptr;
    if (auto* picked = std::get_if<std::unique_ptr<PickedRequest>>(&outcome)) {
      if (cancelled_ || finished_) {
        actions.released = std::move(*picked);  // nobody to route any more
      } else {
        picked_ = std::move(*picked);
        QueueRouted(*picked_);
      }
    } else if (const DirectAnswer& answer = std::get<DirectAnswer>(outcome);
               answer.http_status == 500 && options_->fail_open) {
      QueuePassThrough();
    } else if (answer.http_status == 500) {
      QueueAnswer({503, {}, answer.body});
    } else {
      QueueAnswer(answer);
    }
    Next(&actions);
  }
  Run(std::move(actions));
}

void ProcessStream::QueueRouted(const PickedRequest& picked) {
  phase_ = Phase::kRouted;
  Response headers;
  pb::CommonResponse* common = headers.mutable_request_headers()->mutable_response();
  common->set_clear_route_cache(true);
  SetHeader(common->mutable_header_mutation(), kDestinationHeader, picked.endpoint());
  if (has_body_) {
    SetHeader(common->mutable_header_mutation(), "content-length",
              std::to_string(picked.body().size()));
  }
  google::protobuf::Struct lb;
  (*lb.mutable_fields())[kDestinationHeader].set_string_value(picked.endpoint());
  (*headers.mutable_dynamic_metadata()->mutable_fields())[kLbNamespace]
      .mutable_struct_value()
      ->Swap(&lb);
  Queue(std::move(headers));
  if (has_body_)
    QueueBody(picked.body());
}

void ProcessStream::QueuePassThrough() {
  phase_ = Phase::kPassThrough;
  Response headers;
  headers.mutable_request_headers()->mutable_response();
  Queue(std::move(headers));
  if (has_body_)
    QueueBody(pass_through_body_);
  pass_through_body_.clear();
}

void ProcessStream::QueueBody(const std::string& body) {
  for (std::string_view chunk : BodyChunks(body)) {
    const bool last = chunk.data() + chunk.size() == body.data() + body.size();
    Queue(BodyChunk(Response::kRequestBody, chunk, last));
  }
  if (trailers_pending_) {
    Response trailers;
    trailers.mutable_request_trailers();
    Queue(std::move(trailers));
    trailers_pending_ = false;
  }
}

void ProcessStream::QueueAnswer(const DirectAnswer& answer) {
  phase_ = Phase::kAnswered;
  Response response;
  pb::ImmediateResponse* immediate = response.mutable_immediate_response();
  immediate->mutable_status()->set_code(
      envoy::type::v3::StatusCode_IsValid(answer.http_status)
          ? static_cast<envoy::type::v3::StatusCode>(answer.http_status)
          : envoy::type::v3::InternalServerError);
  SetHeader(immediate->mutable_headers(), "content-type", "application/json");
  for (const auto& [name, value] : answer.headers)
    SetHeader(immediate->mutable_headers(), name, value);
  immediate->set_body(answer.body);
  Queue(std::move(response));
  finish_when_written_ = true;
}

void ProcessStream::Queue(Response response) {
  if (!finished_)
    writes_.push_back(std::move(response));
}

void ProcessStream::Next(Actions* actions) {
  if (finished_)
    return;
  if (!writing_ && !writes_.empty()) {
    writing_ = true;
    actions->write = &writes_.front();
    return;
  }
  if (!writing_ && (finish_when_written_ || (reads_done_ && phase_ != Phase::kPicking))) {
    finished_ = true;
    actions->finish = true;
    actions->status = finish_status_;
  }
}

void ProcessStream::Run(Actions actions) {
  if (actions.cancel_pick)
    actions.cancel_pick();
  actions.released.reset();
  if (actions.write != nullptr)
    StartWrite(actions.write);
  if (actions.finish)
    Finish(actions.status);
}

void ProcessStream::OnWriteDone(bool ok) {
  Actions actions;
  {
    base::MutexLock lock(&mu_);
    writing_ = false;
    writes_.pop_front();
    if (!ok) {  // the stream is broken: nothing more goes out
      writes_.clear();
      finish_when_written_ = true;
      finish_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
    }
    Next(&actions);
  }
  Run(std::move(actions));
}

void ProcessStream::OnCancel() {
  Actions actions;
  {
    base::MutexLock lock(&mu_);
    cancelled_ = true;
    actions.released = std::move(picked_);
    actions.cancel_pick = std::move(cancel_pick_);
    if (!finished_ && !writing_) {
      finished_ = true;
      actions.finish = true;
      actions.status = grpc::Status::CANCELLED;
    } else {
      writes_.erase(writes_.begin() + (writing_ ? 1 : 0), writes_.end());
      finish_when_written_ = true;
      finish_status_ = grpc::Status::CANCELLED;
    }
  }
  Run(std::move(actions));
}

}  // namespace switchyard::router::extproc
