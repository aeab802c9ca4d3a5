#include "base/logging.h"

#include <cstdlib>
#include <string>

namespace switchyard::base {

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
