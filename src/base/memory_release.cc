#include "base/memory_release.h"

#include <malloc.h>

// gperftools' C entry point, present only when tcmalloc is linked: a weak reference is null
// otherwise (sanitizer builds, tests), and glibc's trim runs instead.
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace switchyard::base {

void ReleaseFreeMemory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    malloc_trim(0);
  }
}

}  // namespace switchyard::base
