// ReleaseFreeMemory: hands the allocator's free memory back to the system, so that the
// process shrinks after a burst (a wave of connections, a large batch) instead of keeping its
// peak for good. With tcmalloc linked (the release `switchyard` binary) it releases
// tcmalloc's free pages; otherwise it trims glibc's heap. Costs a few milliseconds: call it
// after a burst, never per request. Thread-safe.
#pragma once

namespace switchyard::base {

void ReleaseFreeMemory();

}  // namespace switchyard::base
