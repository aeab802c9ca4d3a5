#include "base/thread_name.h"

#include <pthread.h>

#include <string>

namespace switchyard::base {
namespace {

constexpr size_t kMaxThreadNameBytes = 15;

void SetName(pthread_t thread, std::string_view name) {
  const std::string cut(name.substr(0, kMaxThreadNameBytes));
  pthread_setname_np(thread, cut.c_str());
}

}  // namespace

void SetThreadName(std::thread& thread, std::string_view name) {
  SetName(thread.native_handle(), name);
}

void SetCurrentThreadName(std::string_view name) {
  SetName(pthread_self(), name);
}

}  // namespace switchyard::base
