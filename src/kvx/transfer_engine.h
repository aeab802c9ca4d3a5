// TransferEngine: moves KV blocks between registered memory regions on its own threads, in
// NIXL's shape. Memory is registered once (RegisterRegion), block lists are resolved once
// into descriptor tables (PrepareBlockList: every bounds check happens here), and then a
// transfer is posted as two lists of table indices (Post): entry src_indices[i] of the
// source table is copied to entry dst_indices[i] of the destination table, every segment.
// Copies are coalesced: blocks adjacent in both source and destination are one memcpy per
// segment (one per run when both sides keep a block's segments together); see
// internal/block_copy.h.
//
// Transfers are asynchronous: Post queues and returns at once (ResourceExhausted when the
// bounded queue is full: the engine loop never blocks here), and the caller learns the
// outcome from Poll or from the optional callback. Cancel stops a queued transfer before it
// runs and a running one between two copy ops; copies already made stay made, so a
// cancelled or failed transfer may leave its destination partly written.
//
// Threads: options.num_threads transfer threads, named `<thread_name>-<i>`, owned by the
// engine, pop transfers from one FIFO queue and run each to its end. Transfers on different
// threads run at the same time in no set order: two that write the same blocks, or one that
// reads blocks another writes, must be ordered by the caller (post the second from the
// first's callback). Callbacks run on the transfer thread that finished the transfer,
// exactly once per posted transfer, without any engine lock held: they may call Post, Poll
// and Cancel but must not destroy the engine, and a slow callback holds up that thread's
// next transfer. Every public method may be called from any thread; once the destructor
// has begun only callbacks may still call in.
// The destructor cancels instead of draining: it refuses new posts, cancels every queued
// transfer (each still gets its callback, with kCancelled, on a transfer thread), asks
// running ones to stop at their next copy op, then joins the threads.
//
// Ownership: the engine owns copies of the regions and the descriptor tables, both kept
// until it is destroyed (register at startup; there is no unregister yet). It does not own
// the memory the regions describe, which must outlive it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "kvx/internal/descriptor_table.h"
#include "kvx/memory_region.h"
#include "kvx/transfer_handle.h"

namespace switchyard::kvx {

struct TransferEngineOptions {
  int num_threads = 2;
  // Transfers posted and not yet picked up by a thread; Post refuses more.
  size_t max_queued_transfers = 1024;
  // Thread names get "-<i>" appended (and are cut to 15 characters, Linux's limit).
  std::string thread_name = "sy-kvx";
  // Called on the transfer thread before each copy op with its bytes, after the op has
  // passed its cancellation check: lets tracing see a transfer's progress, and tests act at
  // a known point of a running transfer. Must not block for long.
  std::function<void(size_t bytes)> on_copy_op = nullptr;
};

// Totals since construction; each read on its own (relaxed), so a snapshot taken while
// transfers run may mix moments.
struct TransferCounters {
  uint64_t bytes_moved = 0;
  uint64_t copy_ops = 0;
  uint64_t transfers_done = 0;
  uint64_t transfers_failed = 0;
  uint64_t transfers_cancelled = 0;
};

class TransferEngine {
 public:
  // Starts the threads. REQUIRES: num_threads >= 1, max_queued_transfers >= 1.
  explicit TransferEngine(TransferEngineOptions options);
  ~TransferEngine();
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;

  // Keeps a copy of `region` (MemoryRegion::Create has checked its bounds).
  RegionHandle RegisterRegion(MemoryRegion region);

  // Resolves `block_ids` of the region into a descriptor table. InvalidArgument for an
  // unknown region handle; OutOfRange for a block id outside the region.
  absl::StatusOr<BlockListHandle> PrepareBlockList(RegionHandle region,
                                                   std::span<const int32_t> block_ids);

  // Queues a copy of src's entries src_indices[i] to dst's entries dst_indices[i].
  // InvalidArgument for an unknown table handle, index lists of different lengths, or
  // regions whose block layouts differ; OutOfRange for an index outside its table;
  // ResourceExhausted when max_queued_transfers are queued; FailedPrecondition once the
  // destructor has begun (a callback may see that). A transfer whose merged copy
  // would overlap its own source ends kFailed with InvalidArgument. `on_done`, if set, is
  // called as the class comment says; it is not called when Post returns an error.
  absl::StatusOr<TransferHandle> Post(BlockListHandle src, std::span<const int32_t> src_indices,
                                      BlockListHandle dst, std::span<const int32_t> dst_indices,
                                      TransferCallback on_done = nullptr);

  // The transfer's state now, and its outcome once final. REQUIRES: handle.valid().
  TransferStatus Poll(const TransferHandle& handle) const;

  // A queued transfer will not run; a running one stops before its next copy op (one that
  // is already on its last op ends kDone); a finished one is left as it is. Poll shows
  // kCancelled at once for a queued transfer, when the thread stops for a running one.
  // REQUIRES: handle.valid().
  void Cancel(const TransferHandle& handle);

  TransferCounters counters() const;

 private:
  void ThreadLoop();
  // Runs (or, when cancelled while queued, only finishes) one transfer.
  void Run(internal::Transfer& transfer);
  // Stores the final state, counts it and calls the callback.
  void Finish(internal::Transfer& transfer, TransferState state, const absl::Status& status);

  const TransferEngineOptions options_;

  base::Mutex registry_mu_;
  // Stable addresses: transfers and tables point at the entries.
  std::vector<std::unique_ptr<MemoryRegion>> regions_ ABSL_GUARDED_BY(registry_mu_);
  std::vector<std::unique_ptr<internal::DescriptorTable>> tables_ ABSL_GUARDED_BY(registry_mu_);

  base::Mutex queue_mu_;
  base::CondVar queue_cv_;
  std::deque<std::shared_ptr<internal::Transfer>> queue_ ABSL_GUARDED_BY(queue_mu_);
  // Set once, under queue_mu_ (so that a thread waiting on queue_cv_ sees it); running
  // transfers read it between copy ops without the lock.
  std::atomic<bool> stopping_{false};

  std::atomic<uint64_t> bytes_moved_{0};
  std::atomic<uint64_t> copy_ops_{0};
  std::atomic<uint64_t> transfers_done_{0};
  std::atomic<uint64_t> transfers_failed_{0};
  std::atomic<uint64_t> transfers_cancelled_{0};

  std::vector<std::thread> threads_;
};

}  // namespace switchyard::kvx
