#include "router/extproc/health_service.h"

#include <algorithm>
#include <utility>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace switchyard::router::extproc {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr char kCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kWatch[] = "/grpc.health.v1.Health/Watch";
constexpr std::string_view kServingNames[] = {"", "liveness", "readiness",
                                              "envoy.service.ext_proc.v3.ExternalProcessor"};

// HealthCheckRequest's `service` (field 1, a string); false: not that message.
bool ParseServiceName(const grpc::ByteBuffer& buffer, std::string* service) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok())
    return false;
  google::protobuf::io::CodedInputStream in(slice.begin(), static_cast<int>(slice.size()));
  service->clear();
  while (const uint32_t tag = in.ReadTag()) {
    if (tag == WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      if (!WireFormatLite::ReadString(&in, service))
        return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

// HealthCheckResponse{status} (field 1, an enum).
grpc::ByteBuffer HealthResponse(int status) {
  const char bytes[] = {
      static_cast<char>(WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_VARINT)),
      static_cast<char>(status)};
  grpc::Slice slice(bytes, sizeof(bytes));
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

void HealthStatus::Set(bool serving) {
  std::vector<std::shared_ptr<HealthCall>> watches;
  {
    base::MutexLock lock(&mu_);
    serving_ = serving;
    watches = watches_;
  }
  for (const auto& call : watches)
    call->SendLatest();
}

int HealthStatus::Of(std::string_view service) const {
  if (std::find(std::begin(kServingNames), std::end(kServingNames), service) ==
      std::end(kServingNames))
    return kServiceUnknown;
  base::MutexLock lock(&mu_);
  return serving_ ? kServing : kNotServing;
}

void HealthStatus::AddWatch(std::shared_ptr<HealthCall> call) {
  base::MutexLock lock(&mu_);
  watches_.push_back(std::move(call));
}

void HealthStatus::RemoveWatch(const HealthCall* call) {
  base::MutexLock lock(&mu_);
  std::erase_if(watches_, [call](const auto& watch) { return watch.get() == call; });
}

void HealthCall::Await(grpc::AsyncGenericService* service, CompletionQueues* queues,
                       grpc::ServerCompletionQueue* queue, HealthStatus* status) {
  std::shared_ptr<HealthCall> call(new HealthCall(service, queues, queue, status));
  call->context_.AsyncNotifyWhenDone(call->done_op_.Start());
  const bool requested = queues->Submit([&] {
    service->RequestCall(&call->context_, &call->stream_, queue, queue, call->call_op_.Start());
  });
  if (!requested)
    call->done_op_.Abandon();
}

void HealthCall::OnCall(bool ok) {
  if (!ok) {  // the server is shutting down: no call came, and no end-of-call notice comes
    done_op_.Abandon();
    return;
  }
  Await(service_, queues_, queue_, status_);
  if (context_.method() == kCheck || context_.method() == kWatch) {
    queues_->Submit([&] { stream_.Read(&request_, read_op_.Start()); });
  } else {
    Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
}

void HealthCall::OnReadDone(bool ok) {
  if (!ok || !ParseServiceName(request_, &service_name_)) {
    Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no HealthCheckRequest"));
    return;
  }
  const int status = status_->Of(service_name_);
  if (context_.method() == kWatch) {
    {
      // The end-of-call notice runs on this queue's thread too: not meanwhile.
      base::MutexLock lock(&mu_);
      if (ended_) {
        finished_ = true;
        Finish(grpc::Status::CANCELLED);
        return;
      }
      watching_ = true;
    }
    status_->AddWatch(shared_from_this());
    SendLatest();
  } else if (status == HealthStatus::kServiceUnknown) {
    Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    base::MutexLock lock(&mu_);
    response_ = HealthResponse(status);
    const grpc::ByteBuffer* response = &response_;  // the lambda cannot see the lock
    queues_->Submit([&] {
      stream_.WriteAndFinish(*response, grpc::WriteOptions(), grpc::Status::OK, finish_op_.Start());
    });
  }
}

void HealthCall::SendLatest() {
  base::MutexLock lock(&mu_);
  if (!watching_ || writing_ || ended_)
    return;  // a write under way sends the latest when it is done
  const int status = status_->Of(service_name_);
  if (status == sent_)
    return;
  sent_ = status;
  writing_ = true;
  response_ = HealthResponse(status);
  const grpc::ByteBuffer* response = &response_;  // the lambda cannot see the lock
  if (!queues_->Submit([&] { stream_.Write(*response, write_op_.Start()); }))
    ended_ = true;
}

void HealthCall::OnWriteDone(bool ok) {
  {
    base::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok)
      ended_ = true;
    if (ended_ && !finished_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
      return;
    }
  }
  SendLatest();
}

void HealthCall::OnFinishDone(bool) {}

void HealthCall::OnCallDone(bool) {
  status_->RemoveWatch(this);
  base::MutexLock lock(&mu_);
  ended_ = true;
  if (watching_ && !writing_ && !finished_) {
    finished_ = true;
    Finish(grpc::Status::CANCELLED);
  }
}

void HealthCall::Finish(const grpc::Status& status) {
  queues_->Submit([&] { stream_.Finish(status, finish_op_.Start()); });
}

}  // namespace switchyard::router::extproc
