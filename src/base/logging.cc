#include "base/logging.h"

#include <cstdlib>
#include <string>

namespace switchyard::base {
namespace {

// spdlog makes its registry on first use, inside its prebuilt library, where TSan cannot see
// the guard that orders that first use before other threads' later ones: two threads' first
// log lines then looked like a race (PeerBlockTransferTest, once under load). Made here,
// before main and any thread, the registry is there before anything can race on it.
[[maybe_unused]] const spdlog::logger* const kDefaultLogger = spdlog::default_logger_raw();

}  // namespace

bool SetLogLevel(std::string_view level) {
  const auto parsed = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept "off" when asked for it.
  if (parsed == spdlog::level::off && level != "off")
    return false;
  spdlog::set_level(parsed);
  return true;
}

void CheckFailed(const char* file, int line, const char* condition) {
  spdlog::critical("check failed at {}:{}: {}", file, line, condition);
  spdlog::shutdown();
  std::abort();
}

}  // namespace switchyard::base
