// Host memory for the CPU backend's large buffers (KV pools, activations, packed weights).
#pragma once

#include <cstddef>

namespace switchyard::runtime::cpu {

// At least `bytes` of memory, 64-byte aligned; from 2 MiB up, aligned to and sized in 2 MiB
// huge pages, with the kernel asked (MADV_HUGEPAGE, a hint) to back it with them. The KV
// pools are read in scattered pieces of a block (6 KiB at SmolLM2's shape), and on 4 KiB
// pages nearly every piece of a pool larger than the TLB's reach missed the TLB. Returns
// nullptr when out of memory; free with std::free. REQUIRES: bytes > 0.
void* AllocateHostMemory(size_t bytes);

}  // namespace switchyard::runtime::cpu
