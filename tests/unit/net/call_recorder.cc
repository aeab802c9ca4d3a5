#include "call_recorder.h"

#include <utility>

#include "gtest/gtest.h"

namespace switchyard::net::testing {

CallRecorder::CallRecorder() : state_(std::make_shared<State>()) {}

HttpClientCallbacks CallRecorder::Callbacks() {
  HttpClientCallbacks callbacks;
  callbacks.on_head = [state = state_](int status, const HeaderList& headers) {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->done_calls > 0)
      ++state->out_of_order;
    ++state->head_calls;
    state->head_status = status;
    state->headers = headers;
    state->cv.notify_all();
  };
  callbacks.on_body = [state = state_](std::string_view chunk) {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->head_calls == 0 || state->done_calls > 0)
      ++state->out_of_order;
    state->body.append(chunk);
    ++state->pieces;
    state->cv.notify_all();
    return state->accept_body ? state->accept_body(state->body) : true;
  };
  callbacks.on_done = [state = state_](const absl::Status& status) {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->done_calls > 0)
      ++state->out_of_order;
    ++state->done_calls;
    state->status = status;
    state->cv.notify_all();
  };
  return callbacks;
}

void CallRecorder::set_accept_body(std::function<bool(const std::string&)> accept_body) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->accept_body = std::move(accept_body);
}

template <typename Pred>
bool CallRecorder::WaitFor(std::chrono::milliseconds timeout, Pred pred) {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->cv.wait_for(lock, timeout, [&] { return pred(*state_); });
}

bool CallRecorder::WaitDone(std::chrono::milliseconds timeout) {
  return WaitFor(timeout, [](const State& s) { return s.done_calls > 0; });
}

bool CallRecorder::WaitBody(size_t bytes, std::chrono::milliseconds timeout) {
  return WaitFor(timeout, [bytes](const State& s) { return s.body.size() >= bytes; });
}

bool CallRecorder::WaitHead(std::chrono::milliseconds timeout) {
  return WaitFor(timeout, [](const State& s) { return s.head_calls > 0; });
}

bool CallRecorder::WaitPiecesOrDone(size_t pieces, std::chrono::milliseconds timeout) {
  return WaitFor(timeout,
                 [pieces](const State& s) { return s.pieces > pieces || s.done_calls > 0; });
}

absl::Status CallRecorder::status() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->status;
}

int CallRecorder::head_status() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->head_status;
}

HeaderList CallRecorder::headers() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->headers;
}

std::optional<std::string> CallRecorder::Header(const std::string& lower_name) {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (const auto& [name, value] : state_->headers) {
    if (name == lower_name)
      return value;
  }
  return std::nullopt;
}

std::string CallRecorder::body() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->body;
}

size_t CallRecorder::pieces() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->pieces;
}

int CallRecorder::done_calls() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done_calls;
}

int CallRecorder::head_calls() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->head_calls;
}

int CallRecorder::out_of_order() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->out_of_order;
}

std::unique_ptr<HttpClient> StartClientOrDie(const HttpClientOptions& options) {
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Start(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

}  // namespace switchyard::net::testing
