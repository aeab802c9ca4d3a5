// TCP for the KV peer protocol: listening, connecting, and moving exact byte counts with a
// deadline. Sockets are non-blocking; ReadFully and WriteFully wait in poll(2) on the socket
// and on an optional cancel descriptor (an eventfd the owner makes readable to stop every
// wait at once, as a server does when it shuts down), so a stalled or stopped peer costs a
// timeout, never a hung thread. Reads and writes take iovec lists so that a block's segments
// go between the socket and KV memory with no staging copy.
//
// Free functions on descriptors the caller owns; any thread, one thread per socket at a time.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "kvx/unique_fd.h"

namespace switchyard::kvx {

// Binds and listens on `address` (a numeric IPv4/IPv6 address or a host name; the first
// address that binds wins) and `port` (0 = any free port). Errors: InvalidArgument for an
// address that does not resolve, Unavailable when binding or listening fails.
absl::StatusOr<UniqueFd> ListenTcp(const std::string& address, uint16_t port);

// The local port a socket is bound to.
absl::StatusOr<uint16_t> LocalPort(int fd);

// Accepts one pending connection, non-blocking with TCP_NODELAY. Unavailable when none is
// pending or accept fails.
absl::StatusOr<UniqueFd> AcceptTcp(int listen_fd);

// Connects to host:port within `timeout`. Errors: InvalidArgument for a host that does not
// resolve, DeadlineExceeded, Unavailable when every address refuses.
absl::StatusOr<UniqueFd> ConnectTcp(const std::string& host, uint16_t port, absl::Duration timeout);

// Fills `iov` completely (all buffers, in order). Errors: Unavailable when the peer closes
// the connection first (the message says after how many bytes) or the socket fails,
// DeadlineExceeded at `deadline`, Cancelled when `cancel_fd` (>= 0) becomes readable. On
// error some prefix of the bytes may have been read: the connection is then unusable.
absl::Status ReadFully(int fd, std::span<const iovec> iov, absl::Time deadline, int cancel_fd = -1);

// Writes every byte of `iov`; errors as ReadFully's (a peer that has closed is Unavailable).
absl::Status WriteFully(int fd, std::span<const iovec> iov, absl::Time deadline,
                        int cancel_fd = -1);

}  // namespace switchyard::kvx
