#include "router/shared/replica_update.h"

#include <span>

#include "fmt/format.h"

#include "base/byte_reader.h"
#include "base/byte_writer.h"
#include "base/logging.h"

namespace switchyard::router {
namespace {

constexpr std::string_view kMagic = "SYRU";
constexpr uint8_t kVersion = 1;

void PutString(std::string_view s, std::string* out) {
  SY_CHECK(s.size() <= kMaxReplicaStringBytes);
  base::AppendLittleEndian(static_cast<uint16_t>(s.size()), out);
  out->append(s);
}

void PutCount(size_t n, std::string* out) {
  base::AppendLittleEndian(static_cast<uint32_t>(n), out);
}

class Decoder {
 public:
  explicit Decoder(std::string_view bytes)
      : reader_(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) {}

  bool String(std::string* out) {
    uint16_t n = 0;
    std::string_view s;
    if (!reader_.Read(&n) || n > kMaxReplicaStringBytes || !reader_.ReadBytes(n, &s))
      return false;
    out->assign(s);
    return true;
  }
  template <typename T>
  bool Int(T* out) {
    return reader_.Read(out);
  }
  // A count of entries of at least `min_entry_bytes` each, which the bytes left must hold.
  bool Count(size_t min_entry_bytes, size_t* out) {
    uint32_t n = 0;
    if (!reader_.Read(&n) || static_cast<uint64_t>(n) * min_entry_bytes > reader_.remaining())
      return false;
    *out = n;
    return true;
  }
  bool Magic() {
    std::string_view magic;
    uint8_t version = 0;
    return reader_.ReadBytes(kMagic.size(), &magic) && magic == kMagic && reader_.Read(&version) &&
           version == kVersion;
  }
  bool AtEnd() const { return reader_.remaining() == 0; }

 private:
  base::ByteReader reader_;
};

bool DecodeLists(Decoder& d, ReplicaUpdate* u) {
  size_t n = 0;
  if (!d.String(&u->replica_id) || !d.Count(6, &n))
    return false;
  u->prefixes.resize(n);
  for (PrefixObservation& p : u->prefixes) {
    size_t keys = 0;
    if (!d.String(&p.endpoint) || !d.Count(8, &keys) || keys > kMaxPrefixKeys)
      return false;
    p.keys.resize(keys);
    for (uint64_t& k : p.keys) {
      if (!d.Int(&k))
        return false;
    }
  }
  if (!d.Count(4, &n))
    return false;
  u->sessions.resize(n);
  for (SessionBinding& s : u->sessions) {
    if (!d.String(&s.session_id) || !d.String(&s.endpoint))
      return false;
  }
  if (!d.Count(18, &n))
    return false;
  u->charges.resize(n);
  for (flow::QuotaCharge& c : u->charges) {
    if (!d.String(&c.tenant_id) || !d.Int(&c.requests) || !d.Int(&c.tokens))
      return false;
  }
  if (!d.Count(26, &n))
    return false;
  u->load.resize(n);
  for (EndpointLoadShare& l : u->load) {
    if (!d.String(&l.endpoint) || !d.Int(&l.requests) || !d.Int(&l.prompt_tokens) ||
        !d.Int(&l.tokens))
      return false;
  }
  return true;
}

}  // namespace

std::string EncodeReplicaUpdate(const ReplicaUpdate& u) {
  std::string out(kMagic);
  out.push_back(static_cast<char>(kVersion));
  PutString(u.replica_id, &out);
  PutCount(u.prefixes.size(), &out);
  for (const PrefixObservation& p : u.prefixes) {
    SY_CHECK(p.keys.size() <= kMaxPrefixKeys);
    PutString(p.endpoint, &out);
    PutCount(p.keys.size(), &out);
    for (uint64_t k : p.keys)
      base::AppendLittleEndian(k, &out);
  }
  PutCount(u.sessions.size(), &out);
  for (const SessionBinding& s : u.sessions) {
    PutString(s.session_id, &out);
    PutString(s.endpoint, &out);
  }
  PutCount(u.charges.size(), &out);
  for (const flow::QuotaCharge& c : u.charges) {
    PutString(c.tenant_id, &out);
    base::AppendLittleEndian(c.requests, &out);
    base::AppendLittleEndian(c.tokens, &out);
  }
  PutCount(u.load.size(), &out);
  for (const EndpointLoadShare& l : u.load) {
    PutString(l.endpoint, &out);
    base::AppendLittleEndian(l.requests, &out);
    base::AppendLittleEndian(l.prompt_tokens, &out);
    base::AppendLittleEndian(l.tokens, &out);
  }
  return out;
}

absl::StatusOr<ReplicaUpdate> DecodeReplicaUpdate(std::string_view bytes) {
  Decoder d(bytes);
  ReplicaUpdate u;
  if (!d.Magic())
    return absl::InvalidArgumentError("replica update: not a version-1 SYRU message");
  if (!DecodeLists(d, &u) || !d.AtEnd()) {
    return absl::InvalidArgumentError(
        fmt::format("replica update: malformed or truncated ({} bytes)", bytes.size()));
  }
  return u;
}

}  // namespace switchyard::router
