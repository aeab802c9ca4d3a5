// The tags of the ext_proc server's completion queues (gRPC's asynchronous API): each queue's
// one thread takes the next event and runs its tag's Complete.
#pragma once

#include <memory>
#include <utility>

namespace switchyard::router::extproc {

class CompletionTag {
 public:
  virtual ~CompletionTag() = default;
  virtual void Complete(bool ok) = 0;
};

// One of a call's operations in gRPC (a read, a write, its Finish ...), as the tag whose
// completion runs `handler` on the call. The call (T, owned by shared_ptr) lives while any of
// its operations is outstanding: Start() (just before handing the tag to gRPC) holds it until
// the completion's handler has run. One outstanding at a time per operation.
template <typename T>
class CallOperation final : public CompletionTag {
 public:
  using Handler = void (T::*)(bool ok);

  CallOperation(T* call, Handler handler) : call_(call), handler_(handler) {}

  CompletionTag* Start() {
    hold_ = call_->shared_from_this();
    return this;
  }
  // Its completion will not come after all (the call never started): lets the call go.
  void Abandon() { hold_.reset(); }

  void Complete(bool ok) override {
    const std::shared_ptr<T> hold = std::move(hold_);
    (call_->*handler_)(ok);
  }

 private:
  T* const call_;
  const Handler handler_;
  std::shared_ptr<T> hold_;
};

}  // namespace switchyard::router::extproc
