// The tags of the ext_proc server's completion queues (gRPC's asynchronous API): each queue's
// one thread takes the next event and runs its tag's Complete.
#pragma once

#include <memory>
#include <utility>

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace switchyard::router::extproc {

// gRPC hands a tag from the thread that gave it to the queue's thread with synchronization
// inside its own (uninstrumented) library; under ThreadSanitizer, Handed and Received say so
// (a release and an acquire on the tag), so what the giver wrote before is seen as ordered.
class CompletionTag {
 public:
  virtual ~CompletionTag() = default;
  virtual void Complete(bool ok) = 0;

  // Call just before giving this tag to gRPC; returns it.
  CompletionTag* Handed() {
#if defined(__SANITIZE_THREAD__)
    __tsan_release(this);
#endif
    return this;
  }
  // The queue's thread calls it when gRPC returns the tag, before Complete.
  void Received() {
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(this);
#endif
  }
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
    return Handed();
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
