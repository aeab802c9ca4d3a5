// RandomBytes: bytes from the system's random source (std::random_device: /dev/urandom or
// the CPU's generator on Linux), for secrets a process makes up when none is configured.
// Any thread.
#pragma once

#include <cstddef>
#include <string>

namespace switchyard::base {

std::string RandomBytes(size_t n);

}  // namespace switchyard::base
