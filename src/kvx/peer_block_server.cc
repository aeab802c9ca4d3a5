#include "kvx/peer_block_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

#include "base/logging.h"
#include "base/thread_name.h"
#include "kvx/peer_connection.h"
#include "kvx/peer_frame.h"
#include "kvx/tcp_socket.h"

namespace switchyard::kvx {
namespace {

// Refuses a connection over the limit without a handshake: the peer's handshake reads the
// kRefuse (or, if its hello crossed our close, a reset) and reports the peer busy.
void RefuseBusy(UniqueFd fd) {
  std::string frame;
  AppendPeerRefuseFrame(PeerRefusal::kBusy, "too many KV peer connections", &frame);
  send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd.get(), SHUT_WR);
  // Drain what already arrived so that closing sends a FIN, not a reset that could
  // overtake the refusal.
  char sink[512];
  while (recv(fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
}

// One connection's requests, until the peer closes, an error, or shutdown.
class ConnectionHandler {
 public:
  ConnectionHandler(PeerConnection& connection, const MemoryRegion& region, PeerBlockSource& source,
                    std::atomic<uint64_t>& blocks_sent, std::atomic<uint64_t>& bytes_sent,
                    std::atomic<uint64_t>& reads_failed)
      : connection_(connection),
        region_(region),
        source_(source),
        blocks_sent_(blocks_sent),
        bytes_sent_(bytes_sent),
        reads_failed_(reads_failed) {}

  // Returns why the connection ended (Unavailable for the peer closing it).
  absl::Status Run() {
    while (true) {
      auto header = connection_.ReadHeader(kMaxPeerControlPayloadBytes);
      if (!header.ok())
        return Refuse(header.status());
      auto payload = connection_.ReadPayload(*header);
      if (!payload.ok())
        return payload.status();
      absl::Status handled = Handle(*header, AsPeerBytes(*payload));
      if (!handled.ok())
        return handled;
    }
  }

 private:
  absl::Status Handle(const PeerFrameHeader& header, std::span<const uint8_t> payload) {
    switch (header.type) {
      case PeerFrameType::kLookupBlocks:
        return Lookup(header.stream_id, payload);
      case PeerFrameType::kReadBlocks:
        return Read(header.stream_id, payload);
      case PeerFrameType::kReleaseBlocks: {
        auto blocks = ParsePeerBlockList(payload);
        if (!blocks.ok())
          return Refuse(blocks.status());
        std::vector<int32_t> ids;
        if (absl::Status s = ToLocalIds(blocks->block_ids, &ids); !s.ok())
          return Refuse(s);
        source_.Release(ids);
        return absl::OkStatus();
      }
      default:
        return Refuse(absl::InvalidArgumentError(
            absl::StrFormat("KV peer sent a %s frame; this side serves lookups and reads",
                            PeerFrameTypeName(header.type))));
    }
  }

  absl::Status Lookup(uint32_t stream_id, std::span<const uint8_t> payload) {
    auto lookup = ParsePeerLookupBlocks(payload);
    if (!lookup.ok())
      return Refuse(lookup.status());
    auto result = source_.Lookup(lookup->hashes);
    PeerLookupResult reply;
    if (result.ok() && result->block_ids.size() <= lookup->hashes.size())
      reply = *std::move(result);  // an error is answered as "holds nothing"
    std::string frame;
    AppendPeerFrame(PeerFrameType::kLookupResult, stream_id, EncodePeerLookupResult(reply), &frame);
    return connection_.Send(frame);
  }

  absl::Status Read(uint32_t stream_id, std::span<const uint8_t> payload) {
    auto request = ParsePeerBlockList(payload);
    if (!request.ok())
      return Refuse(request.status());
    std::vector<int32_t> ids;
    const absl::Status valid = ToLocalIds(request->block_ids, &ids);
    const absl::StatusOr<uint64_t> read =
        valid.ok() ? source_.BeginRead(ids) : absl::StatusOr<uint64_t>(valid);
    if (!read.ok()) {
      reads_failed_.fetch_add(1, std::memory_order_relaxed);
      return SendReadDone(stream_id, read.status());
    }
    absl::Status sent = SendBlocks(stream_id, ids);
    source_.EndRead(*read);
    if (!sent.ok()) {
      reads_failed_.fetch_add(1, std::memory_order_relaxed);
      return sent;  // the connection is broken mid-frame
    }
    return SendReadDone(stream_id, absl::OkStatus());
  }

  absl::Status SendBlocks(uint32_t stream_id, std::span<const int32_t> ids) {
    const KvBlockLayout& layout = region_.layout();
    const size_t block_bytes = layout.block_bytes();
    std::vector<iovec> iov(1 + layout.num_segments());
    for (size_t i = 0; i < ids.size(); ++i) {
      std::array<uint8_t, kPeerFrameHeaderBytes + kPeerBlockDataHeaderBytes> head{};
      const auto frame_header = EncodePeerFrameHeader(
          {.type = PeerFrameType::kBlockData,
           .stream_id = stream_id,
           .payload_bytes = static_cast<uint32_t>(kPeerBlockDataHeaderBytes + block_bytes)});
      const std::string index = EncodePeerBlockDataHeader({.index = static_cast<uint32_t>(i)});
      std::copy(frame_header.begin(), frame_header.end(), head.begin());
      std::copy(index.begin(), index.end(), head.begin() + kPeerFrameHeaderBytes);
      iov[0] = {head.data(), head.size()};
      for (size_t s = 0; s < layout.num_segments(); ++s)
        iov[1 + s] = {region_.addr(ids[i], s), layout.segment_bytes(s)};
      if (absl::Status sent = connection_.SendV(iov); !sent.ok())
        return sent;
      blocks_sent_.fetch_add(1, std::memory_order_relaxed);
      bytes_sent_.fetch_add(block_bytes, std::memory_order_relaxed);
    }
    return absl::OkStatus();
  }

  absl::Status SendReadDone(uint32_t stream_id, const absl::Status& status) {
    std::string frame;
    AppendPeerFrame(PeerFrameType::kReadDone, stream_id, EncodePeerReadDone({.status = status}),
                    &frame);
    return connection_.Send(frame);
  }

  // Wire ids as this region's block ids. OutOfRange names the first one outside it.
  absl::Status ToLocalIds(std::span<const uint32_t> wire, std::vector<int32_t>* out) const {
    out->reserve(wire.size());
    for (uint32_t id : wire) {
      if (id >= static_cast<uint64_t>(region_.num_blocks())) {
        return absl::OutOfRangeError(absl::StrFormat(
            "block id %d is outside this engine's %d KV blocks", id, region_.num_blocks()));
      }
      out->push_back(static_cast<int32_t>(id));
    }
    return absl::OkStatus();
  }

  // Sends a kRefuse saying why (best effort) and returns `error`: the connection ends.
  absl::Status Refuse(const absl::Status& error) {
    if (error.code() == absl::StatusCode::kInvalidArgument ||
        error.code() == absl::StatusCode::kOutOfRange) {
      std::string frame;
      AppendPeerRefuseFrame(PeerRefusal::kProtocolError, std::string(error.message()), &frame);
      connection_.Send(frame).IgnoreError();
    }
    return error;
  }

  PeerConnection& connection_;
  const MemoryRegion& region_;
  PeerBlockSource& source_;
  std::atomic<uint64_t>& blocks_sent_;
  std::atomic<uint64_t>& bytes_sent_;
  std::atomic<uint64_t>& reads_failed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PeerBlockServer>> PeerBlockServer::Start(
    PeerBlockServerOptions options, MemoryRegion region, PeerBlockSource* source) {
  auto listen_fd = ListenTcp(options.address, options.port);
  if (!listen_fd.ok())
    return listen_fd.status();
  auto port = LocalPort(listen_fd->get());
  if (!port.ok())
    return port.status();
  UniqueFd stop_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd.valid())
    return absl::UnavailableError("eventfd failed");
  options.handshake.role = PeerRole::kAcceptor;
  return std::unique_ptr<PeerBlockServer>(new PeerBlockServer(std::move(options), std::move(region),
                                                              source, *std::move(listen_fd),
                                                              std::move(stop_fd), *port));
}

PeerBlockServer::PeerBlockServer(PeerBlockServerOptions options, MemoryRegion region,
                                 PeerBlockSource* source, UniqueFd listen_fd, UniqueFd stop_fd,
                                 uint16_t port)
    : options_(std::move(options)),
      region_(std::move(region)),
      source_(source),
      listen_fd_(std::move(listen_fd)),
      stop_fd_(std::move(stop_fd)),
      port_(port) {
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

PeerBlockServer::~PeerBlockServer() {
  const uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of overflow, which one write never reaches.
  [[maybe_unused]] const ssize_t written = write(stop_fd_.get(), &one, sizeof(one));
  accept_thread_.join();
  base::MutexLock lock(&workers_mu_);
  for (Worker& worker : workers_)
    worker.thread.join();
}

PeerBlockServerCounters PeerBlockServer::counters() const {
  return {.connections_accepted = connections_accepted_.load(std::memory_order_relaxed),
          .connections_refused = connections_refused_.load(std::memory_order_relaxed),
          .blocks_sent = blocks_sent_.load(std::memory_order_relaxed),
          .bytes_sent = bytes_sent_.load(std::memory_order_relaxed),
          .reads_failed = reads_failed_.load(std::memory_order_relaxed)};
}

void PeerBlockServer::AcceptLoop() {
  base::SetCurrentThreadName(options_.thread_name + "-acc");
  while (true) {
    std::array<pollfd, 2> fds = {pollfd{listen_fd_.get(), POLLIN, 0},
                                 pollfd{stop_fd_.get(), POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      SY_LOG_ERROR("KV peer server: poll failed ({}); no longer accepting", errno);
      return;
    }
    if ((fds[1].revents & POLLIN) != 0)
      return;
    auto fd = AcceptTcp(listen_fd_.get());
    if (!fd.ok())
      continue;  // the peer went away before accept, or a transient error
    base::MutexLock lock(&workers_mu_);
    ReapFinished();
    if (workers_.size() >= options_.max_connections) {
      connections_refused_.fetch_add(1, std::memory_order_relaxed);
      RefuseBusy(*std::move(fd));
      continue;
    }
    Worker& worker = workers_.emplace_back();
    worker.thread = std::thread([this, &worker, conn = *std::move(fd)]() mutable {
      base::SetCurrentThreadName(options_.thread_name + "-conn");
      Serve(std::move(conn));
      worker.finished.store(true, std::memory_order_release);
    });
  }
}

void PeerBlockServer::ReapFinished() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished.load(std::memory_order_acquire)) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void PeerBlockServer::Serve(UniqueFd fd) {
  auto connection =
      PeerConnection::Open(std::move(fd), options_.handshake, options_.io_timeout, stop_fd_.get());
  if (!connection.ok()) {
    connections_refused_.fetch_add(1, std::memory_order_relaxed);
    SY_LOG_WARN("KV peer connection refused: {}", connection.status().ToString());
    return;
  }
  connections_accepted_.fetch_add(1, std::memory_order_relaxed);
  ConnectionHandler handler(*connection, region_, *source_, blocks_sent_, bytes_sent_,
                            reads_failed_);
  const absl::Status ended = handler.Run();
  if (ended.code() != absl::StatusCode::kUnavailable &&
      ended.code() != absl::StatusCode::kCancelled) {
    SY_LOG_WARN("KV peer connection from '{}' closed: {}", connection->peer().engine_id,
                ended.ToString());
  }
}

}  // namespace switchyard::kvx
