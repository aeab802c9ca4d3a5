#include "kvx/peer_messages.h"

#include <cstring>
#include <string_view>

#include "absl/strings/str_format.h"

#include "base/byte_reader.h"
#include "base/byte_writer.h"
#include "base/status_macros.h"

namespace switchyard::kvx {
namespace {

constexpr uint16_t kLastRefusal = static_cast<uint16_t>(PeerRefusal::kProtocolError);
constexpr uint16_t kLastStatusCode = static_cast<uint16_t>(absl::StatusCode::kUnauthenticated);

// One payload being parsed: a ByteReader whose failures name the message.
class PayloadParser {
 public:
  PayloadParser(const char* message, std::span<const uint8_t> payload)
      : message_(message), reader_(payload) {}

  template <typename T>
  absl::Status Read(T* out) {
    if (!reader_.Read(out))
      return Error("is truncated");
    return absl::OkStatus();
  }

  template <size_t N>
  absl::Status ReadArray(std::array<uint8_t, N>* out) {
    std::string_view bytes;
    if (!reader_.ReadBytes(N, &bytes))
      return Error("is truncated");
    std::memcpy(out->data(), bytes.data(), N);
    return absl::OkStatus();
  }

  // A u16 length, then that many bytes, at most `max_bytes`.
  absl::Status ReadString(size_t max_bytes, std::string* out) {
    uint16_t size = 0;
    std::string_view bytes;
    if (!reader_.Read(&size) || !reader_.ReadBytes(size, &bytes))
      return Error("is truncated");
    if (size > max_bytes)
      return Error(absl::StrFormat("has a string of %d bytes (at most %d)", size, max_bytes));
    out->assign(bytes);
    return absl::OkStatus();
  }

  // A u32 count, at most kMaxPeerBlocksPerRequest, whose `item_bytes`-sized items must all
  // be present: checked before the caller allocates for them.
  absl::StatusOr<uint32_t> ReadCount(size_t item_bytes) {
    uint32_t count = 0;
    if (!reader_.Read(&count))
      return Error("is truncated");
    if (count > kMaxPeerBlocksPerRequest) {
      return Error(
          absl::StrFormat("lists %d blocks (at most %d)", count, kMaxPeerBlocksPerRequest));
    }
    if (reader_.remaining() < static_cast<uint64_t>(count) * item_bytes)
      return Error(absl::StrFormat("lists %d blocks but is truncated", count));
    return count;
  }

  absl::Status ReadBlockIds(std::vector<uint32_t>* out) {
    SY_ASSIGN_OR_RETURN(const uint32_t count, ReadCount(sizeof(uint32_t)));
    out->resize(count);
    for (uint32_t& id : *out)
      reader_.Read(&id);  // ReadCount checked these bytes are present.
    return absl::OkStatus();
  }

  // The payload must end here.
  absl::Status Finish() {
    if (reader_.remaining() != 0)
      return Error(absl::StrFormat("has %d trailing bytes", reader_.remaining()));
    return absl::OkStatus();
  }

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("KV peer %s message %s", message_, what));
  }

 private:
  const char* message_;
  base::ByteReader reader_;
};

void AppendBytes(std::span<const uint8_t> bytes, std::string* out) {
  out->append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// REQUIRES: s.size() <= UINT16_MAX.
void AppendString(std::string_view s, std::string* out) {
  base::AppendLittleEndian(static_cast<uint16_t>(s.size()), out);
  out->append(s);
}

void AppendBlockIds(std::span<const uint32_t> ids, std::string* out) {
  base::AppendLittleEndian(static_cast<uint32_t>(ids.size()), out);
  for (uint32_t id : ids)
    base::AppendLittleEndian(id, out);
}

}  // namespace

void AppendPeerRefuseFrame(PeerRefusal reason, std::string_view message, std::string* out) {
  AppendPeerFrame(PeerFrameType::kRefuse, /*stream_id=*/0,
                  EncodePeerRefuse({.reason = reason, .message = std::string(message)}), out);
}

std::string EncodePeerHello(const PeerHello& hello) {
  std::string out;
  AppendBytes(hello.compatibility_hash, &out);
  AppendBytes(hello.nonce, &out);
  AppendString(std::string_view(hello.engine_id).substr(0, kMaxPeerEngineIdBytes), &out);
  return out;
}

std::string EncodePeerAuth(const PeerAuth& auth) {
  std::string out;
  AppendBytes(auth.mac, &out);
  return out;
}

std::string EncodePeerRefuse(const PeerRefuse& refuse) {
  std::string out;
  base::AppendLittleEndian(static_cast<uint16_t>(refuse.reason), &out);
  AppendString(std::string_view(refuse.message).substr(0, kMaxPeerMessageBytes), &out);
  return out;
}

std::string EncodePeerLookupBlocks(const PeerLookupBlocks& lookup) {
  std::string out;
  base::AppendLittleEndian(static_cast<uint32_t>(lookup.hashes.size()), &out);
  for (const PeerDigest& hash : lookup.hashes)
    AppendBytes(hash, &out);
  return out;
}

std::string EncodePeerLookupResult(const PeerLookupResult& result) {
  std::string out;
  base::AppendLittleEndian(result.lease_ms, &out);
  AppendBlockIds(result.block_ids, &out);
  return out;
}

std::string EncodePeerBlockList(const PeerBlockList& blocks) {
  std::string out;
  AppendBlockIds(blocks.block_ids, &out);
  return out;
}

std::string EncodePeerBlockDataHeader(const PeerBlockDataHeader& header) {
  std::string out;
  base::AppendLittleEndian(header.index, &out);
  return out;
}

std::string EncodePeerReadDone(const PeerReadDone& done) {
  std::string out;
  base::AppendLittleEndian(static_cast<uint16_t>(done.status.code()), &out);
  // Debian's Abseil has its own string_view.
  const std::string_view message(done.status.message().data(), done.status.message().size());
  AppendString(message.substr(0, kMaxPeerMessageBytes), &out);
  return out;
}

absl::StatusOr<PeerHello> ParsePeerHello(std::span<const uint8_t> payload) {
  PayloadParser parser("hello", payload);
  PeerHello hello;
  SY_RETURN_IF_ERROR(parser.ReadArray(&hello.compatibility_hash));
  SY_RETURN_IF_ERROR(parser.ReadArray(&hello.nonce));
  SY_RETURN_IF_ERROR(parser.ReadString(kMaxPeerEngineIdBytes, &hello.engine_id));
  SY_RETURN_IF_ERROR(parser.Finish());
  return hello;
}

absl::StatusOr<PeerAuth> ParsePeerAuth(std::span<const uint8_t> payload) {
  PayloadParser parser("auth", payload);
  PeerAuth auth;
  SY_RETURN_IF_ERROR(parser.ReadArray(&auth.mac));
  SY_RETURN_IF_ERROR(parser.Finish());
  return auth;
}

absl::StatusOr<PeerRefuse> ParsePeerRefuse(std::span<const uint8_t> payload) {
  PayloadParser parser("refuse", payload);
  uint16_t reason = 0;
  PeerRefuse refuse;
  SY_RETURN_IF_ERROR(parser.Read(&reason));
  if (reason == 0 || reason > kLastRefusal)
    return parser.Error(absl::StrFormat("has unknown reason %d", reason));
  refuse.reason = static_cast<PeerRefusal>(reason);
  SY_RETURN_IF_ERROR(parser.ReadString(kMaxPeerMessageBytes, &refuse.message));
  SY_RETURN_IF_ERROR(parser.Finish());
  return refuse;
}

absl::StatusOr<PeerLookupBlocks> ParsePeerLookupBlocks(std::span<const uint8_t> payload) {
  PayloadParser parser("lookup_blocks", payload);
  SY_ASSIGN_OR_RETURN(const uint32_t count, parser.ReadCount(sizeof(PeerDigest)));
  PeerLookupBlocks lookup;
  lookup.hashes.resize(count);
  for (PeerDigest& hash : lookup.hashes)
    SY_RETURN_IF_ERROR(parser.ReadArray(&hash));
  SY_RETURN_IF_ERROR(parser.Finish());
  return lookup;
}

absl::StatusOr<PeerLookupResult> ParsePeerLookupResult(std::span<const uint8_t> payload) {
  PayloadParser parser("lookup_result", payload);
  PeerLookupResult result;
  SY_RETURN_IF_ERROR(parser.Read(&result.lease_ms));
  SY_RETURN_IF_ERROR(parser.ReadBlockIds(&result.block_ids));
  SY_RETURN_IF_ERROR(parser.Finish());
  return result;
}

absl::StatusOr<PeerBlockList> ParsePeerBlockList(std::span<const uint8_t> payload) {
  PayloadParser parser("block list", payload);
  PeerBlockList blocks;
  SY_RETURN_IF_ERROR(parser.ReadBlockIds(&blocks.block_ids));
  SY_RETURN_IF_ERROR(parser.Finish());
  return blocks;
}

absl::StatusOr<PeerBlockDataHeader> ParsePeerBlockDataHeader(std::span<const uint8_t> payload) {
  PayloadParser parser("block_data", payload);
  PeerBlockDataHeader header;
  SY_RETURN_IF_ERROR(parser.Read(&header.index));
  return header;
}

absl::StatusOr<PeerReadDone> ParsePeerReadDone(std::span<const uint8_t> payload) {
  PayloadParser parser("read_done", payload);
  uint16_t code = 0;
  std::string message;
  SY_RETURN_IF_ERROR(parser.Read(&code));
  if (code > kLastStatusCode)
    return parser.Error(absl::StrFormat("has unknown status code %d", code));
  SY_RETURN_IF_ERROR(parser.ReadString(kMaxPeerMessageBytes, &message));
  SY_RETURN_IF_ERROR(parser.Finish());
  if (code == 0 && !message.empty())
    return parser.Error("has a message with status OK");
  return PeerReadDone{.status = absl::Status(static_cast<absl::StatusCode>(code), message)};
}

}  // namespace switchyard::kvx
