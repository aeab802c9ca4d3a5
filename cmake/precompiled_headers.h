// The headers most of the project's units include, precompiled once per target when
// SY_PRECOMPILE_HEADERS is on (the asan and tsan presets, which CI builds cold): an ASan build
// of sy_router, sy_engine, sy_kvx and sy_router_tests with their dependencies took 342 s with
// it, 455 s without (ccache off, one run each). Only standard and Abseil headers belong here:
// their content must not depend on any target's macros. A unit still includes what it uses;
// scripts/tidy.sh checks each changed unit without this header, so a missing include fails
// there.
#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
