#include "kvx/transfer_engine.h"

#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/thread_name.h"
#include "kvx/internal/block_copy.h"
#include "kvx/internal/transfer.h"

namespace switchyard::kvx {
namespace {

absl::Status CheckIndices(std::span<const int32_t> indices, size_t table_size,
                          std::string_view side) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || static_cast<size_t>(indices[i]) >= table_size)
      return absl::OutOfRangeError(
          fmt::format("kvx transfer: {} index {} is {}, outside its table of {}", side, i,
                      indices[i], table_size));
  }
  return absl::OkStatus();
}

}  // namespace

TransferEngine::TransferEngine(TransferEngineOptions options) : options_(std::move(options)) {
  threads_.reserve(static_cast<size_t>(options_.num_threads));
  for (int i = 0; i < options_.num_threads; ++i) {
    threads_.emplace_back([this] { ThreadLoop(); });
    base::SetThreadName(threads_.back(), fmt::format("{}-{}", options_.thread_name, i));
  }
}

TransferEngine::~TransferEngine() {
  {
    base::MutexLock lock(&queue_mu_);
    stopping_.store(true, std::memory_order_release);
    // Cancelled here, so that Poll shows it at once; the threads pop them only to run their
    // callbacks.
    for (const std::shared_ptr<internal::Transfer>& transfer : queue_)
      transfer->CancelIfPending();
  }
  queue_cv_.NotifyAll();
  for (std::thread& thread : threads_)
    thread.join();
}

RegionHandle TransferEngine::RegisterRegion(MemoryRegion region) {
  base::MutexLock lock(&registry_mu_);
  regions_.push_back(std::make_unique<MemoryRegion>(std::move(region)));
  return RegionHandle{static_cast<uint32_t>(regions_.size() - 1)};
}

absl::StatusOr<BlockListHandle> TransferEngine::PrepareBlockList(
    RegionHandle region, std::span<const int32_t> block_ids) {
  const MemoryRegion* memory = nullptr;
  {
    base::MutexLock lock(&registry_mu_);
    if (region.index >= regions_.size())
      return absl::InvalidArgumentError(fmt::format("kvx: no registered region {}", region.index));
    memory = regions_[region.index].get();
  }
  // Resolved outside the lock: a long list does not hold up other callers.
  absl::StatusOr<internal::DescriptorTable> table =
      internal::DescriptorTable::Resolve(*memory, block_ids);
  if (!table.ok())
    return table.status();
  base::MutexLock lock(&registry_mu_);
  tables_.push_back(std::make_unique<internal::DescriptorTable>(*std::move(table)));
  return BlockListHandle{static_cast<uint32_t>(tables_.size() - 1)};
}

absl::StatusOr<TransferHandle> TransferEngine::Post(BlockListHandle src,
                                                    std::span<const int32_t> src_indices,
                                                    BlockListHandle dst,
                                                    std::span<const int32_t> dst_indices,
                                                    TransferCallback on_done) {
  auto transfer = std::make_shared<internal::Transfer>();
  {
    base::MutexLock lock(&registry_mu_);
    if (src.index >= tables_.size() || dst.index >= tables_.size())
      return absl::InvalidArgumentError("kvx transfer: unknown block list");
    transfer->src = tables_[src.index].get();
    transfer->dst = tables_[dst.index].get();
  }
  if (src_indices.size() != dst_indices.size())
    return absl::InvalidArgumentError(
        fmt::format("kvx transfer: {} source entries for {} destination entries",
                    src_indices.size(), dst_indices.size()));
  if (!(transfer->src->region->layout() == transfer->dst->region->layout()))
    return absl::InvalidArgumentError(
        "kvx transfer: the source and destination regions have different block layouts");
  if (absl::Status status = CheckIndices(src_indices, transfer->src->size(), "source");
      !status.ok())
    return status;
  if (absl::Status status = CheckIndices(dst_indices, transfer->dst->size(), "destination");
      !status.ok())
    return status;
  transfer->src_entries.assign(src_indices.begin(), src_indices.end());
  transfer->dst_entries.assign(dst_indices.begin(), dst_indices.end());
  transfer->on_done = std::move(on_done);
  {
    base::MutexLock lock(&queue_mu_);
    if (stopping_.load(std::memory_order_acquire))
      return absl::FailedPreconditionError("kvx transfer engine is shutting down");
    if (queue_.size() >= options_.max_queued_transfers)
      return absl::ResourceExhaustedError(
          fmt::format("kvx transfer queue is full ({} transfers)", options_.max_queued_transfers));
    queue_.push_back(transfer);
  }
  queue_cv_.NotifyOne();
  return TransferHandle(std::move(transfer));
}

TransferStatus TransferEngine::Poll(const TransferHandle& handle) const {
  const internal::Transfer& transfer = *handle.transfer_;
  const TransferState state = transfer.state.load(std::memory_order_acquire);
  switch (state) {
    case TransferState::kFailed:
      return {state, transfer.failure};
    case TransferState::kCancelled:
      return {state, absl::CancelledError("kvx transfer cancelled")};
    default:
      return {state, absl::OkStatus()};
  }
}

void TransferEngine::Cancel(const TransferHandle& handle) {
  internal::Transfer& transfer = *handle.transfer_;
  if (!transfer.CancelIfPending())
    transfer.cancel_requested.store(true, std::memory_order_release);
}

TransferCounters TransferEngine::counters() const {
  return {.bytes_moved = bytes_moved_.load(std::memory_order_relaxed),
          .copy_ops = copy_ops_.load(std::memory_order_relaxed),
          .transfers_done = transfers_done_.load(std::memory_order_relaxed),
          .transfers_failed = transfers_failed_.load(std::memory_order_relaxed),
          .transfers_cancelled = transfers_cancelled_.load(std::memory_order_relaxed)};
}

void TransferEngine::ThreadLoop() {
  for (;;) {
    std::shared_ptr<internal::Transfer> transfer;
    {
      base::MutexLock lock(&queue_mu_);
      queue_cv_.Wait(&queue_mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
        return stopping_.load(std::memory_order_acquire) || !queue_.empty();
      });
      if (queue_.empty())
        return;
      transfer = std::move(queue_.front());
      queue_.pop_front();
    }
    Run(*transfer);
  }
}

void TransferEngine::Run(internal::Transfer& transfer) {
  TransferState expected = TransferState::kPending;
  if (!transfer.state.compare_exchange_strong(expected, TransferState::kRunning,
                                              std::memory_order_acq_rel)) {
    // Cancelled while queued: only its callback is left to run.
    Finish(transfer, TransferState::kCancelled, absl::CancelledError("kvx transfer cancelled"));
    return;
  }
  absl::Status status =
      internal::CopyBlocks(*transfer.src, transfer.src_entries, *transfer.dst, transfer.dst_entries,
                           [this, &transfer](size_t bytes) {
                             if (transfer.cancel_requested.load(std::memory_order_acquire) ||
                                 stopping_.load(std::memory_order_acquire))
                               return false;
                             if (options_.on_copy_op)
                               options_.on_copy_op(bytes);
                             copy_ops_.fetch_add(1, std::memory_order_relaxed);
                             bytes_moved_.fetch_add(bytes, std::memory_order_relaxed);
                             return true;
                           });
  if (status.ok())
    Finish(transfer, TransferState::kDone, status);
  else if (absl::IsCancelled(status))
    Finish(transfer, TransferState::kCancelled, status);
  else
    Finish(transfer, TransferState::kFailed, status);
}

void TransferEngine::Finish(internal::Transfer& transfer, TransferState state,
                            const absl::Status& status) {
  switch (state) {
    case TransferState::kDone:
      transfers_done_.fetch_add(1, std::memory_order_relaxed);
      break;
    case TransferState::kFailed:
      transfer.failure = status;
      transfers_failed_.fetch_add(1, std::memory_order_relaxed);
      break;
    default:
      transfers_cancelled_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  // A transfer cancelled while queued is kCancelled already; storing it again is harmless.
  transfer.state.store(state, std::memory_order_release);
  if (transfer.on_done) {
    TransferCallback on_done = std::move(transfer.on_done);
    on_done(state, status);
  }
}

}  // namespace switchyard::kvx
