#include "kvx/peer_handshake.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/logging.h"

namespace switchyard::kvx {
namespace {

constexpr std::string_view kProofLabel = "switchyard kv peer proof v1";

absl::Status RefusedBy(const PeerRefuse& refuse) {
  const std::string message =
      absl::StrFormat("KV peer refused the connection: %s",
                      refuse.message.empty() ? "(no reason given)" : refuse.message);
  switch (refuse.reason) {
    case PeerRefusal::kIncompatible:
      return absl::FailedPreconditionError(message);
    case PeerRefusal::kUnauthenticated:
      return absl::UnauthenticatedError(message);
    case PeerRefusal::kBusy:
      return absl::UnavailableError(message);
    case PeerRefusal::kProtocolError:
      break;
  }
  return absl::InvalidArgumentError(message);
}

std::string HexOf(const PeerDigest& digest) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace

PeerNonce RandomPeerNonce() {
  PeerNonce nonce;
  // RAND_bytes fails only when the CSPRNG cannot be seeded, which a running Linux process
  // never sees; a predictable nonce would weaken every proof, so it is fatal.
  SY_CHECK(RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) == 1);
  return nonce;
}

PeerDigest PeerProof(std::string_view secret, PeerRole prover, const PeerHello& initiator,
                     const PeerHello& acceptor) {
  std::string message(kProofLabel);
  message.push_back(prover == PeerRole::kInitiator ? 'I' : 'A');
  message += EncodePeerHello(initiator);
  message += EncodePeerHello(acceptor);
  PeerDigest mac{};
  unsigned int mac_bytes = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(),
       &mac_bytes);
  return mac;
}

PeerHandshake::PeerHandshake(PeerHandshakeOptions options, PeerNonce nonce)
    : options_(std::move(options)) {
  own_hello_.compatibility_hash = options_.compatibility_hash;
  own_hello_.nonce = nonce;
  own_hello_.engine_id = options_.engine_id.substr(0, kMaxPeerEngineIdBytes);
}

void PeerHandshake::Start(std::string* out) {
  AppendPeerFrame(PeerFrameType::kHello, 0, EncodePeerHello(own_hello_), out);
  state_ = State::kAwaitHello;
}

absl::Status PeerHandshake::OnFrame(const PeerFrameHeader& header, std::span<const uint8_t> payload,
                                    std::string* out) {
  if (header.type == PeerFrameType::kRefuse) {
    state_ = State::kFailed;
    auto refuse = ParsePeerRefuse(payload);
    return refuse.ok() ? RefusedBy(*refuse) : refuse.status();
  }
  if (state_ == State::kAwaitHello && header.type == PeerFrameType::kHello)
    return OnHello(payload, out);
  if (state_ == State::kAwaitAuth && header.type == PeerFrameType::kAuth)
    return OnAuth(payload, out);
  return Refuse(PeerRefusal::kProtocolError,
                absl::InvalidArgumentError(
                    absl::StrFormat("KV peer sent a %s frame during the handshake, out of order",
                                    PeerFrameTypeName(header.type))),
                out);
}

absl::Status PeerHandshake::OnHello(std::span<const uint8_t> payload, std::string* out) {
  auto hello = ParsePeerHello(payload);
  if (!hello.ok())
    return Refuse(PeerRefusal::kProtocolError, hello.status(), out);
  peer_hello_ = *std::move(hello);
  if (peer_hello_.compatibility_hash != own_hello_.compatibility_hash) {
    return Refuse(PeerRefusal::kIncompatible,
                  absl::FailedPreconditionError(absl::StrFormat(
                      "KV peer '%s' holds incompatible KV (compatibility hash %s, ours %s): "
                      "a different model, dtype, layout or block size",
                      peer_hello_.engine_id, HexOf(peer_hello_.compatibility_hash),
                      HexOf(own_hello_.compatibility_hash))),
                  out);
  }
  const PeerAuth auth{
      .mac = PeerProof(options_.secret, options_.role, initiator_hello(), acceptor_hello())};
  AppendPeerFrame(PeerFrameType::kAuth, 0, EncodePeerAuth(auth), out);
  state_ = State::kAwaitAuth;
  return absl::OkStatus();
}

absl::Status PeerHandshake::OnAuth(std::span<const uint8_t> payload, std::string* out) {
  auto auth = ParsePeerAuth(payload);
  if (!auth.ok())
    return Refuse(PeerRefusal::kProtocolError, auth.status(), out);
  const PeerRole peer_role =
      options_.role == PeerRole::kInitiator ? PeerRole::kAcceptor : PeerRole::kInitiator;
  const PeerDigest expected =
      PeerProof(options_.secret, peer_role, initiator_hello(), acceptor_hello());
  if (CRYPTO_memcmp(expected.data(), auth->mac.data(), expected.size()) != 0) {
    return Refuse(PeerRefusal::kUnauthenticated,
                  absl::UnauthenticatedError(absl::StrFormat(
                      "KV peer '%s' did not prove the shared secret", peer_hello_.engine_id)),
                  out);
  }
  state_ = State::kDone;
  return absl::OkStatus();
}

absl::Status PeerHandshake::Refuse(PeerRefusal reason, absl::Status error, std::string* out) {
  AppendPeerRefuseFrame(reason, std::string(error.message()), out);
  state_ = State::kFailed;
  return error;
}

const PeerHello& PeerHandshake::initiator_hello() const {
  return options_.role == PeerRole::kInitiator ? own_hello_ : peer_hello_;
}

const PeerHello& PeerHandshake::acceptor_hello() const {
  return options_.role == PeerRole::kAcceptor ? own_hello_ : peer_hello_;
}

}  // namespace switchyard::kvx
