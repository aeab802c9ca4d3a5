// Logging (spdlog) and always-on invariant checks. Thread-safe.
//
// SY_CHECK is for programmer errors only: never assert on input from a client, a peer or
// a file (return a Status instead). SY_DCHECK compiles away in release builds.
#pragma once

#include <string_view>

#include "spdlog/spdlog.h"

namespace switchyard::base {

// Sets the global level from a name ("trace", "debug", "info", "warn", "error", "off").
// Unknown names leave the level unchanged and return false.
bool SetLogLevel(std::string_view level);

// Aborts the process after logging where and why. Never returns.
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition);

}  // namespace switchyard::base

#define SY_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define SY_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define SY_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
#define SY_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)

#define SY_CHECK(cond)                                            \
  do {                                                            \
    if (!(cond)) {                                                \
      ::switchyard::base::CheckFailed(__FILE__, __LINE__, #cond); \
    }                                                             \
  } while (false)

#ifdef NDEBUG
#define SY_DCHECK(cond) \
  do {                  \
  } while (false && (cond))
#else
#define SY_DCHECK(cond) SY_CHECK(cond)
#endif
