#include "kvx/peer_handshake.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace switchyard::kvx {
namespace {

using ::testing::HasSubstr;

struct Frame {
  PeerFrameHeader header;
  std::string payload;
};

// Splits what a side sent into frames, as the other side's transport would.
std::vector<Frame> Frames(const std::string& bytes) {
  std::vector<Frame> frames;
  size_t pos = 0;
  while (pos < bytes.size()) {
    std::array<uint8_t, kPeerFrameHeaderBytes> raw;
    EXPECT_GE(bytes.size() - pos, raw.size());
    std::memcpy(raw.data(), bytes.data() + pos, raw.size());
    auto header = DecodePeerFrameHeader(raw, 1 << 20);
    EXPECT_TRUE(header.ok()) << header.status();
    pos += raw.size();
    frames.push_back({*header, bytes.substr(pos, header->payload_bytes)});
    pos += header->payload_bytes;
  }
  return frames;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

PeerHandshakeOptions Options(PeerRole role, const std::string& engine_id,
                             const std::string& secret = "fleet-secret", uint8_t compat = 1) {
  PeerHandshakeOptions options{.role = role, .engine_id = engine_id, .secret = secret};
  options.compatibility_hash.fill(compat);
  return options;
}

// Runs both sides until neither has anything to send; returns each side's last status.
struct Outcome {
  absl::Status initiator;
  absl::Status acceptor;
};
Outcome Exchange(PeerHandshake& initiator, PeerHandshake& acceptor) {
  std::string to_acceptor, to_initiator;
  initiator.Start(&to_acceptor);
  acceptor.Start(&to_initiator);
  Outcome outcome;
  while (!to_acceptor.empty() || !to_initiator.empty()) {
    std::string next_to_acceptor, next_to_initiator;
    for (const Frame& f : Frames(to_acceptor)) {
      if (outcome.acceptor.ok() && !acceptor.done())
        outcome.acceptor = acceptor.OnFrame(f.header, Bytes(f.payload), &next_to_initiator);
    }
    for (const Frame& f : Frames(to_initiator)) {
      if (outcome.initiator.ok() && !initiator.done())
        outcome.initiator = initiator.OnFrame(f.header, Bytes(f.payload), &next_to_acceptor);
    }
    to_acceptor = std::move(next_to_acceptor);
    to_initiator = std::move(next_to_initiator);
  }
  return outcome;
}

TEST(PeerHandshakeTest, PeersWithTheSameSecretAndLayoutConnect) {
  PeerHandshake a(Options(PeerRole::kInitiator, "decode-0"), RandomPeerNonce());
  PeerHandshake b(Options(PeerRole::kAcceptor, "prefill-0"), RandomPeerNonce());
  const Outcome outcome = Exchange(a, b);
  EXPECT_TRUE(outcome.initiator.ok()) << outcome.initiator;
  EXPECT_TRUE(outcome.acceptor.ok()) << outcome.acceptor;
  EXPECT_TRUE(a.done());
  EXPECT_TRUE(b.done());
  EXPECT_EQ(a.peer_hello().engine_id, "prefill-0");
  EXPECT_EQ(b.peer_hello().engine_id, "decode-0");
}

TEST(PeerHandshakeTest, DifferentLayoutsAreRefusedAsIncompatible) {
  PeerHandshake a(Options(PeerRole::kInitiator, "a", "s", /*compat=*/1), RandomPeerNonce());
  PeerHandshake b(Options(PeerRole::kAcceptor, "b", "s", /*compat=*/2), RandomPeerNonce());
  const Outcome outcome = Exchange(a, b);
  EXPECT_EQ(outcome.initiator.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(outcome.acceptor.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(outcome.acceptor.message(), HasSubstr("incompatible KV"));
  EXPECT_FALSE(a.done());
  EXPECT_FALSE(b.done());
}

TEST(PeerHandshakeTest, AWrongSecretIsRefusedAsUnauthenticated) {
  PeerHandshake a(Options(PeerRole::kInitiator, "a", "right"), RandomPeerNonce());
  PeerHandshake b(Options(PeerRole::kAcceptor, "b", "wrong"), RandomPeerNonce());
  const Outcome outcome = Exchange(a, b);
  EXPECT_EQ(outcome.initiator.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(outcome.acceptor.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(a.done());
  EXPECT_FALSE(b.done());
}

TEST(PeerHandshakeTest, ProofsAreBoundToRoleAndBothNonces) {
  PeerHello initiator{.nonce = {1}, .engine_id = "a"};
  PeerHello acceptor{.nonce = {2}, .engine_id = "b"};
  const PeerDigest proof = PeerProof("s", PeerRole::kInitiator, initiator, acceptor);
  EXPECT_NE(proof, PeerProof("s", PeerRole::kAcceptor, initiator, acceptor));
  EXPECT_NE(proof, PeerProof("t", PeerRole::kInitiator, initiator, acceptor));
  PeerHello other_nonce = acceptor;
  other_nonce.nonce[0] = 3;
  EXPECT_NE(proof, PeerProof("s", PeerRole::kInitiator, initiator, other_nonce));
  EXPECT_EQ(proof, PeerProof("s", PeerRole::kInitiator, initiator, acceptor));
}

TEST(PeerHandshakeTest, AReflectedProofIsRefused) {
  // The acceptor sends back the initiator's own proof: it has the right bytes for the
  // initiator's role, not for the acceptor's, so the initiator refuses it.
  PeerHandshake a(Options(PeerRole::kInitiator, "a"), RandomPeerNonce());
  std::string to_acceptor;
  a.Start(&to_acceptor);
  PeerHello b_hello{.nonce = RandomPeerNonce(), .engine_id = "mirror"};
  b_hello.compatibility_hash.fill(1);
  std::string sink;
  const std::string hello = EncodePeerHello(b_hello);
  ASSERT_TRUE(a.OnFrame({.type = PeerFrameType::kHello}, Bytes(hello), &sink).ok());
  const std::string reflected = Frames(sink)[0].payload;  // a's own kAuth
  sink.clear();
  const absl::Status status = a.OnFrame({.type = PeerFrameType::kAuth}, Bytes(reflected), &sink);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  ASSERT_EQ(Frames(sink).size(), 1u);
  EXPECT_EQ(Frames(sink)[0].header.type, PeerFrameType::kRefuse);
  EXPECT_EQ(ParsePeerRefuse(Bytes(Frames(sink)[0].payload))->reason, PeerRefusal::kUnauthenticated);
}

TEST(PeerHandshakeTest, OutOfOrderAndMalformedFramesAreProtocolErrors) {
  PeerHandshake a(Options(PeerRole::kAcceptor, "a"), RandomPeerNonce());
  std::string out;
  a.Start(&out);
  out.clear();
  const std::string auth = EncodePeerAuth({});
  EXPECT_EQ(a.OnFrame({.type = PeerFrameType::kAuth}, Bytes(auth), &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePeerRefuse(Bytes(Frames(out)[0].payload))->reason, PeerRefusal::kProtocolError);

  PeerHandshake b(Options(PeerRole::kAcceptor, "b"), RandomPeerNonce());
  b.Start(&out);
  out.clear();
  EXPECT_THAT(b.OnFrame({.type = PeerFrameType::kHello}, Bytes("short"), &out).message(),
              HasSubstr("truncated"));
  EXPECT_EQ(Frames(out)[0].header.type, PeerFrameType::kRefuse);
}

TEST(PeerHandshakeTest, APeersRefusalMapsToItsReason) {
  const std::pair<PeerRefusal, absl::StatusCode> cases[] = {
      {PeerRefusal::kIncompatible, absl::StatusCode::kFailedPrecondition},
      {PeerRefusal::kUnauthenticated, absl::StatusCode::kUnauthenticated},
      {PeerRefusal::kBusy, absl::StatusCode::kUnavailable},
      {PeerRefusal::kProtocolError, absl::StatusCode::kInvalidArgument},
  };
  for (const auto& [reason, code] : cases) {
    PeerHandshake a(Options(PeerRole::kInitiator, "a"), RandomPeerNonce());
    std::string out;
    a.Start(&out);
    const std::string refuse = EncodePeerRefuse({.reason = reason, .message = "no"});
    const absl::Status status = a.OnFrame({.type = PeerFrameType::kRefuse}, Bytes(refuse), &out);
    EXPECT_EQ(status.code(), code);
    EXPECT_THAT(status.message(), HasSubstr("refused the connection: no"));
  }
}

TEST(PeerHandshakeTest, NoncesAreFresh) {
  EXPECT_NE(RandomPeerNonce(), RandomPeerNonce());
}

}  // namespace
}  // namespace switchyard::kvx
