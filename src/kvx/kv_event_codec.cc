#include "kvx/kv_event_codec.h"

#include <bit>
#include <cstdint>
#include <exception>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"
#include <msgpack.hpp>

#include "base/status_macros.h"

namespace switchyard::kvx {
namespace {

constexpr char kBlockStored[] = "BlockStored";
constexpr char kBlockRemoved[] = "BlockRemoved";
constexpr char kAllBlocksCleared[] = "AllBlocksCleared";
// Deep enough for vLLM's extra_keys (list of tuples of tuples); bounds the parser's stack.
constexpr size_t kMaxDepth = 32;

// msgpack-cxx output stream appending to a std::string.
struct StringSink {
  std::string* out;
  // Not const: msgpack takes &Stream::write as a pointer to a non-const member.
  // NOLINTNEXTLINE(readability-make-member-function-const)
  void write(const char* data, size_t size) { out->append(data, size); }
};

using Packer = msgpack::packer<StringSink>;

class Encoder {
 public:
  Encoder(std::string* out, const KvEventEncoding& encoding)
      : sink_{out}, packer_(sink_), encoding_(encoding) {}

  void Batch(const KvEventBatch& batch) {
    // msgspec drops a defaulted field of a map struct when it holds the default, never one
    // of an array_like struct.
    const bool map_batch = encoding_.layout == EventLayout::kMapBatch;
    if (map_batch)
      packer_.pack_map(batch.data_parallel_rank.has_value() ? 3 : 2);
    else
      packer_.pack_array(3);
    BatchKey(map_batch, "ts");
    Float64(batch.ts);
    BatchKey(map_batch, "events");
    packer_.pack_array(static_cast<uint32_t>(batch.events.size()));
    for (const KvCacheEvent& event : batch.events)
      std::visit([this](const auto& e) { Event(e); }, event);
    if (map_batch && !batch.data_parallel_rank.has_value())
      return;
    BatchKey(map_batch, "data_parallel_rank");
    Optional(batch.data_parallel_rank);
  }

 private:
  void BatchKey(bool map_batch, std::string_view name) {
    if (map_batch)
      Str(name);
  }
  // Writes `name` (map events only) ahead of the field's value.
  void Key(std::string_view name) {
    if (encoding_.layout != EventLayout::kArray)
      Str(name);
  }
  // Opens an event with `num_fields` fields after the tag.
  void Open(std::string_view tag, uint32_t num_fields) {
    if (encoding_.layout != EventLayout::kArray) {
      packer_.pack_map(num_fields + 1);
      Str("type");
    } else {
      packer_.pack_array(num_fields + 1);
    }
    Str(tag);
  }
  // A field with a vLLM default: in map events it is written only when set.
  template <typename T>
  uint32_t Count(const std::optional<T>& value) const {
    return encoding_.layout == EventLayout::kArray || value.has_value() ? 1 : 0;
  }
  template <typename T>
  void Defaulted(std::string_view name, const std::optional<T>& value) {
    if (Count(value) == 0)
      return;
    Key(name);
    Optional(value);
  }

  void Event(const BlockStored& e) {
    Open(kBlockStored, 7 + Count(e.extra_keys_msgpack) + Count(e.group_idx) +
                           Count(e.kv_cache_spec_kind) + Count(e.kv_cache_spec_sliding_window));
    Key("block_hashes");
    Hashes(e.block_hashes);
    Key("parent_block_hash");
    Optional(e.parent_block_hash);
    Key("token_ids");
    packer_.pack_array(static_cast<uint32_t>(e.token_ids.size()));
    for (int32_t token : e.token_ids)
      packer_.pack_int32(token);
    Key("block_size");
    packer_.pack_int32(e.block_size);
    Key("lora_id");
    Optional(e.lora_id);
    Key("medium");
    Optional(e.medium);
    Key("lora_name");
    Optional(e.lora_name);
    if (Count(e.extra_keys_msgpack) == 1) {
      Key("extra_keys");
      if (e.extra_keys_msgpack.has_value())
        sink_.write(e.extra_keys_msgpack->data(), e.extra_keys_msgpack->size());
      else
        packer_.pack_nil();
    }
    Defaulted("group_idx", e.group_idx);
    Defaulted("kv_cache_spec_kind", e.kv_cache_spec_kind);
    Defaulted("kv_cache_spec_sliding_window", e.kv_cache_spec_sliding_window);
  }

  void Event(const BlockRemoved& e) {
    Open(kBlockRemoved, 2 + Count(e.group_idx));
    Key("block_hashes");
    Hashes(e.block_hashes);
    Key("medium");
    Optional(e.medium);
    Defaulted("group_idx", e.group_idx);
  }

  void Event(const AllBlocksCleared&) { Open(kAllBlocksCleared, 0); }

  void Hashes(const std::vector<EventHash>& hashes) {
    packer_.pack_array(static_cast<uint32_t>(hashes.size()));
    for (const EventHash& hash : hashes)
      Value(hash);
  }

  void Value(const EventHash& hash) {
    if (hash.is_int() || encoding_.hashes == HashForm::kInt) {
      packer_.pack_uint64(hash.AsUint64());
      return;
    }
    const auto bytes = hash.bytes();
    packer_.pack_bin(static_cast<uint32_t>(bytes.size()));
    packer_.pack_bin_body(reinterpret_cast<const char*>(bytes.data()),
                          static_cast<uint32_t>(bytes.size()));
  }
  void Value(int64_t value) { packer_.pack_int64(value); }
  void Value(int32_t value) { packer_.pack_int32(value); }
  void Value(const std::string& value) { Str(value); }

  template <typename T>
  void Optional(const std::optional<T>& value) {
    if (value.has_value())
      Value(*value);
    else
      packer_.pack_nil();
  }

  // Python floats are always float64 on the wire; msgpack-cxx's pack_double would write an
  // integral value such as 3.0 as an int.
  void Float64(double value) {
    char out[9] = {static_cast<char>(0xcb)};
    const auto bits = std::bit_cast<uint64_t>(value);
    for (int i = 0; i < 8; ++i)
      out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    sink_.write(out, sizeof(out));
  }

  void Str(std::string_view s) {
    packer_.pack_str(static_cast<uint32_t>(s.size()));
    packer_.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  }

  StringSink sink_;
  Packer packer_;
  const KvEventEncoding encoding_;
};

// ---- decoding ----

std::string_view TypeName(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "bool";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "int";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "float";
    case msgpack::type::STR:
      return "str";
    case msgpack::type::BIN:
      return "bytes";
    case msgpack::type::ARRAY:
      return "array";
    case msgpack::type::MAP:
      return "map";
    default:
      return "ext";
  }
}

absl::Status TypeError(const std::string& where, std::string_view expected,
                       const msgpack::object& o) {
  return absl::InvalidArgumentError(
      fmt::format("KV event batch: {}: expected {}, got {}", where, expected, TypeName(o)));
}

std::string_view AsStr(const msgpack::object& o) {
  return {o.via.str.ptr, o.via.str.size};
}

absl::StatusOr<int64_t> Int(const msgpack::object& o, const std::string& where, int64_t min,
                            int64_t max) {
  int64_t value = 0;
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(max))
      return absl::InvalidArgumentError(
          fmt::format("KV event batch: {}: {} is out of range", where, o.via.u64));
    value = static_cast<int64_t>(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    value = o.via.i64;
  } else {
    return TypeError(where, "an int", o);
  }
  if (value < min || value > max)
    return absl::InvalidArgumentError(
        fmt::format("KV event batch: {}: {} is out of range", where, value));
  return value;
}

absl::StatusOr<std::optional<int64_t>> OptInt(const msgpack::object* o, const std::string& where,
                                              int64_t min, int64_t max) {
  if (o == nullptr || o->type == msgpack::type::NIL)
    return std::nullopt;
  SY_ASSIGN_OR_RETURN(int64_t value, Int(*o, where, min, max));
  return value;
}

absl::StatusOr<std::optional<std::string>> OptStr(const msgpack::object* o,
                                                  const std::string& where) {
  if (o == nullptr || o->type == msgpack::type::NIL)
    return std::nullopt;
  if (o->type != msgpack::type::STR)
    return TypeError(where, "str or nil", *o);
  return std::string(AsStr(*o));
}

absl::StatusOr<EventHash> Hash(const msgpack::object& o, const std::string& where) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
      return EventHash::FromInt(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER:
      return EventHash::FromInt(static_cast<uint64_t>(o.via.i64));
    case msgpack::type::BIN:
      if (o.via.bin.size > EventHash::kMaxBytes)
        return absl::InvalidArgumentError(
            fmt::format("KV event batch: {}: a {}-byte hash is longer than {} bytes", where,
                        o.via.bin.size, EventHash::kMaxBytes));
      return EventHash::FromBytes(
          {reinterpret_cast<const uint8_t*>(o.via.bin.ptr), o.via.bin.size});
    default:
      return TypeError(where, "an int or bytes hash", o);
  }
}

absl::StatusOr<std::vector<EventHash>> Hashes(const msgpack::object* o, const std::string& where) {
  if (o == nullptr || o->type != msgpack::type::ARRAY)
    return o == nullptr
               ? absl::InvalidArgumentError(fmt::format("KV event batch: {}: missing", where))
               : TypeError(where, "an array", *o);
  std::vector<EventHash> hashes;
  hashes.reserve(o->via.array.size);
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    SY_ASSIGN_OR_RETURN(EventHash hash, Hash(o->via.array.ptr[i], fmt::format("{}[{}]", where, i)));
    hashes.push_back(hash);
  }
  return hashes;
}

// An event's fields by name, whichever layout it came in. Pointers into the unpacked tree.
class Fields {
 public:
  // `names` lists the fields after the tag in vLLM's declaration order.
  static absl::StatusOr<Fields> Of(const msgpack::object& event,
                                   std::span<const std::string_view> names,
                                   const std::string& where) {
    Fields fields(where);
    fields.values_.assign(names.size(), nullptr);
    if (event.type == msgpack::type::ARRAY) {
      const uint32_t n = event.via.array.size;
      for (size_t i = 0; i < names.size() && i + 1 < n; ++i)
        fields.values_[i] = &event.via.array.ptr[i + 1];
    } else {
      for (uint32_t i = 0; i < event.via.map.size; ++i) {
        const msgpack::object_kv& kv = event.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR)
          return TypeError(fmt::format("{} key {}", where, i), "str", kv.key);
        for (size_t f = 0; f < names.size(); ++f) {
          if (AsStr(kv.key) == names[f])
            fields.values_[f] = &kv.val;
        }
      }
    }
    fields.names_ = names;
    return fields;
  }

  // The field's value; null when absent.
  const msgpack::object* Get(std::string_view name) const {
    for (size_t f = 0; f < names_.size(); ++f) {
      if (names_[f] == name)
        return values_[f];
    }
    return nullptr;
  }
  std::string Where(std::string_view name) const { return fmt::format("{}.{}", where_, name); }

 private:
  explicit Fields(std::string where) : where_(std::move(where)) {}

  std::string where_;
  std::span<const std::string_view> names_;
  std::vector<const msgpack::object*> values_;
};

constexpr std::string_view kStoredFields[] = {"block_hashes",
                                              "parent_block_hash",
                                              "token_ids",
                                              "block_size",
                                              "lora_id",
                                              "medium",
                                              "lora_name",
                                              "extra_keys",
                                              "group_idx",
                                              "kv_cache_spec_kind",
                                              "kv_cache_spec_sliding_window"};
constexpr std::string_view kRemovedFields[] = {"block_hashes", "medium", "group_idx"};
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

absl::StatusOr<BlockStored> DecodeStored(const Fields& f) {
  BlockStored e;
  SY_ASSIGN_OR_RETURN(e.block_hashes, Hashes(f.Get("block_hashes"), f.Where("block_hashes")));
  if (const msgpack::object* parent = f.Get("parent_block_hash");
      parent != nullptr && parent->type != msgpack::type::NIL) {
    SY_ASSIGN_OR_RETURN(e.parent_block_hash, Hash(*parent, f.Where("parent_block_hash")));
  }
  const msgpack::object* tokens = f.Get("token_ids");
  if (tokens == nullptr)
    return absl::InvalidArgumentError(
        fmt::format("KV event batch: {}: missing", f.Where("token_ids")));
  if (tokens->type != msgpack::type::ARRAY)
    return TypeError(f.Where("token_ids"), "an array", *tokens);
  e.token_ids.reserve(tokens->via.array.size);
  for (uint32_t i = 0; i < tokens->via.array.size; ++i) {
    SY_ASSIGN_OR_RETURN(
        int64_t token, Int(tokens->via.array.ptr[i], fmt::format("{}[{}]", f.Where("token_ids"), i),
                           kInt32Min, kInt32Max));
    e.token_ids.push_back(static_cast<int32_t>(token));
  }
  const msgpack::object* block_size = f.Get("block_size");
  if (block_size == nullptr)
    return absl::InvalidArgumentError(
        fmt::format("KV event batch: {}: missing", f.Where("block_size")));
  SY_ASSIGN_OR_RETURN(int64_t size, Int(*block_size, f.Where("block_size"), 1, kInt32Max));
  e.block_size = static_cast<int32_t>(size);
  SY_ASSIGN_OR_RETURN(e.lora_id,
                      OptInt(f.Get("lora_id"), f.Where("lora_id"), kInt64Min, kInt64Max));
  SY_ASSIGN_OR_RETURN(e.medium, OptStr(f.Get("medium"), f.Where("medium")));
  SY_ASSIGN_OR_RETURN(e.lora_name, OptStr(f.Get("lora_name"), f.Where("lora_name")));
  if (const msgpack::object* extra = f.Get("extra_keys");
      extra != nullptr && extra->type != msgpack::type::NIL) {
    if (extra->type != msgpack::type::ARRAY)
      return TypeError(f.Where("extra_keys"), "an array or nil", *extra);
    msgpack::sbuffer raw;
    msgpack::pack(raw, *extra);
    e.extra_keys_msgpack.emplace(raw.data(), raw.size());
  }
  SY_ASSIGN_OR_RETURN(e.group_idx,
                      OptInt(f.Get("group_idx"), f.Where("group_idx"), kInt64Min, kInt64Max));
  SY_ASSIGN_OR_RETURN(e.kv_cache_spec_kind,
                      OptStr(f.Get("kv_cache_spec_kind"), f.Where("kv_cache_spec_kind")));
  SY_ASSIGN_OR_RETURN(e.kv_cache_spec_sliding_window,
                      OptInt(f.Get("kv_cache_spec_sliding_window"),
                             f.Where("kv_cache_spec_sliding_window"), kInt64Min, kInt64Max));
  return e;
}

absl::StatusOr<BlockRemoved> DecodeRemoved(const Fields& f) {
  BlockRemoved e;
  SY_ASSIGN_OR_RETURN(e.block_hashes, Hashes(f.Get("block_hashes"), f.Where("block_hashes")));
  SY_ASSIGN_OR_RETURN(e.medium, OptStr(f.Get("medium"), f.Where("medium")));
  SY_ASSIGN_OR_RETURN(e.group_idx,
                      OptInt(f.Get("group_idx"), f.Where("group_idx"), kInt64Min, kInt64Max));
  return e;
}

absl::StatusOr<KvCacheEvent> DecodeEvent(const msgpack::object& o, uint32_t index) {
  std::string where = fmt::format("events[{}]", index);
  const msgpack::object* tag = nullptr;
  if (o.type == msgpack::type::ARRAY) {
    if (o.via.array.size > 0)
      tag = &o.via.array.ptr[0];
  } else if (o.type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      if (kv.key.type == msgpack::type::STR && AsStr(kv.key) == "type")
        tag = &kv.val;
    }
  } else {
    return TypeError(where, "an array or map event", o);
  }
  if (tag == nullptr)
    return absl::InvalidArgumentError(
        fmt::format("KV event batch: {}: event has no type tag", where));
  if (tag->type != msgpack::type::STR)
    return TypeError(where + " tag", "str", *tag);
  const std::string_view name = AsStr(*tag);
  where = fmt::format("{} ({})", where, name);
  if (name == kBlockStored) {
    SY_ASSIGN_OR_RETURN(Fields fields, Fields::Of(o, kStoredFields, where));
    return DecodeStored(fields);
  }
  if (name == kBlockRemoved) {
    SY_ASSIGN_OR_RETURN(Fields fields, Fields::Of(o, kRemovedFields, where));
    return DecodeRemoved(fields);
  }
  if (name == kAllBlocksCleared)
    return AllBlocksCleared{};
  return absl::InvalidArgumentError(
      fmt::format("KV event batch: events[{}]: unknown event type \"{}\"", index, name));
}

constexpr std::string_view kBatchFields[] = {"ts", "events", "data_parallel_rank"};

absl::StatusOr<KvEventBatch> DecodeBatch(const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY && o.type != msgpack::type::MAP)
    return TypeError("batch", "an array [ts, events, dp_rank] or a map", o);
  if (o.type == msgpack::type::ARRAY && o.via.array.size < 2)
    return absl::InvalidArgumentError(
        fmt::format("KV event batch: batch: expected [ts, events, dp_rank], got {} elements",
                    o.via.array.size));
  const msgpack::object* values[3] = {nullptr, nullptr, nullptr};
  if (o.type == msgpack::type::ARRAY) {
    for (uint32_t i = 0; i < 3 && i < o.via.array.size; ++i)
      values[i] = &o.via.array.ptr[i];
  } else {
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR)
        return TypeError(fmt::format("batch key {}", i), "str", kv.key);
      for (size_t f = 0; f < std::size(kBatchFields); ++f) {
        if (AsStr(kv.key) == kBatchFields[f])
          values[f] = &kv.val;
      }
    }
    for (size_t f = 0; f < 2; ++f) {
      if (values[f] == nullptr)
        return absl::InvalidArgumentError(
            fmt::format("KV event batch: {}: missing", kBatchFields[f]));
    }
  }
  KvEventBatch batch;
  const msgpack::object& ts = *values[0];
  switch (ts.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      batch.ts = ts.via.f64;
      break;
    case msgpack::type::POSITIVE_INTEGER:
      batch.ts = static_cast<double>(ts.via.u64);
      break;
    case msgpack::type::NEGATIVE_INTEGER:
      batch.ts = static_cast<double>(ts.via.i64);
      break;
    default:
      return TypeError("ts", "a number", ts);
  }
  const msgpack::object& events = *values[1];
  if (events.type != msgpack::type::ARRAY)
    return TypeError("events", "an array", events);
  batch.events.reserve(events.via.array.size);
  for (uint32_t i = 0; i < events.via.array.size; ++i) {
    SY_ASSIGN_OR_RETURN(KvCacheEvent event, DecodeEvent(events.via.array.ptr[i], i));
    batch.events.push_back(std::move(event));
  }
  SY_ASSIGN_OR_RETURN(std::optional<int64_t> rank,
                      OptInt(values[2], "data_parallel_rank", 0, kInt32Max));
  if (rank.has_value())
    batch.data_parallel_rank = static_cast<int32_t>(*rank);
  return batch;
}

constexpr std::pair<EventLayout, std::string_view> kLayoutNames[] = {
    {EventLayout::kArray, "array"},
    {EventLayout::kMap, "map"},
    {EventLayout::kMapBatch, "map_batch"},
};

}  // namespace

std::string_view EventLayoutName(EventLayout layout) {
  for (const auto& [value, name] : kLayoutNames) {
    if (value == layout)
      return name;
  }
  return "unknown";
}

absl::StatusOr<EventLayout> ParseEventLayout(std::string_view name) {
  for (const auto& [value, known] : kLayoutNames) {
    if (known == name)
      return value;
  }
  return absl::InvalidArgumentError(
      fmt::format("event layout \"{}\" is not one of \"array\", \"map\", \"map_batch\"", name));
}

std::string EncodeKvEventBatch(const KvEventBatch& batch, const KvEventEncoding& encoding) {
  std::string out;
  Encoder(&out, encoding).Batch(batch);
  return out;
}

absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view bytes) {
  // Every element takes at least one input byte, so no count may exceed the input size:
  // this keeps a short header claiming 2^32 elements from allocating for them.
  const size_t n = bytes.size();
  const msgpack::unpack_limit limit(n, n, n, n, n, kMaxDepth);
  msgpack::object_handle handle;
  size_t offset = 0;
  try {
    handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("KV event batch: not valid msgpack ({})", e.what()));
  }
  if (offset != bytes.size())
    return absl::InvalidArgumentError(fmt::format(
        "KV event batch: {} trailing bytes after the msgpack value", bytes.size() - offset));
  return DecodeBatch(handle.get());
}

}  // namespace switchyard::kvx
