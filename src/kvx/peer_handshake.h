// The opening of a KV peer connection, as a state machine with no I/O: both sides send a
// kHello (compatibility hash, a fresh nonce, engine id); each checks the other's hash and
// answers with a kAuth proving it knows the shared secret; each verifies the other's proof.
// A mismatch is answered with a kRefuse and ends the handshake with an error. The transport
// (TCP, or a Unix socket between engines on one host) moves the bytes.
//
// A proof is HMAC-SHA256(secret, label | prover's role | initiator's hello | acceptor's
// hello): both nonces make it good for this connection only, the role stops a side from
// reflecting the other's proof back, and the hellos bind it to the compatibility hashes and
// engine ids both sides saw. Proofs are compared in constant time.
//
// One object per connection, used by the thread that owns the connection.
#pragma once

#include <span>
#include <string>

#include "absl/status/status.h"

#include "kvx/peer_frame.h"
#include "kvx/peer_messages.h"

namespace switchyard::kvx {

enum class PeerRole { kInitiator, kAcceptor };

struct PeerHandshakeOptions {
  PeerRole role = PeerRole::kInitiator;
  // KvCompatibility::Digest() of this side's KV (kv_compatibility.h).
  PeerDigest compatibility_hash{};
  std::string engine_id;
  // The secret both peers are configured with. Empty is allowed (both sides must agree); the
  // configuration decides whether a deployment may run without one.
  std::string secret;
};

// Fresh random bytes from OpenSSL's CSPRNG.
PeerNonce RandomPeerNonce();

// The proof `prover` sends; exposed for tests.
PeerDigest PeerProof(std::string_view secret, PeerRole prover, const PeerHello& initiator,
                     const PeerHello& acceptor);

class PeerHandshake {
 public:
  PeerHandshake(PeerHandshakeOptions options, PeerNonce nonce);

  // Appends this side's kHello frame to `out`. Call once, first.
  void Start(std::string* out);

  // Feeds one received frame (its header and whole payload) and appends what to send back
  // to `out`. OK: go on reading until done(). An error ends the connection after the
  // frames in `out` (a kRefuse where this side refuses) are sent: FailedPrecondition for
  // incompatible KV, Unauthenticated for a wrong proof, InvalidArgument for a malformed or
  // unexpected frame, and for a kRefuse from the peer the error its reason maps to
  // (kBusy: Unavailable).
  // REQUIRES: Start() called, !done(), no earlier error.
  absl::Status OnFrame(const PeerFrameHeader& header, std::span<const uint8_t> payload,
                       std::string* out);

  // Both hellos exchanged and the peer's proof verified.
  bool done() const { return state_ == State::kDone; }
  // The peer's hello, once received.
  const PeerHello& peer_hello() const { return peer_hello_; }

 private:
  enum class State { kNew, kAwaitHello, kAwaitAuth, kDone, kFailed };

  absl::Status OnHello(std::span<const uint8_t> payload, std::string* out);
  absl::Status OnAuth(std::span<const uint8_t> payload, std::string* out);
  // Appends a kRefuse and returns `error`, moving to kFailed.
  absl::Status Refuse(PeerRefusal reason, absl::Status error, std::string* out);

  const PeerHello& initiator_hello() const;
  const PeerHello& acceptor_hello() const;

  PeerHandshakeOptions options_;
  PeerHello own_hello_;
  PeerHello peer_hello_;
  State state_ = State::kNew;
};

}  // namespace switchyard::kvx
