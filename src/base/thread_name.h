// Names threads for ps, top, gdb and perf. Linux keeps at most 15 bytes of a thread's name
// and refuses longer ones, so longer names are cut to 15 bytes here instead.
// Any thread; `thread` must be joinable.
#pragma once

#include <string_view>
#include <thread>

namespace switchyard::base {

void SetThreadName(std::thread& thread, std::string_view name);
void SetCurrentThreadName(std::string_view name);

}  // namespace switchyard::base
