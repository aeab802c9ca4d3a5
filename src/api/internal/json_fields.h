// Typed, bounded reads of fields from a parsed request object, each failure an InvalidParam
// naming the field. A FieldReader records which keys were read so that the rest can be reported
// as unknown (vLLM accepts and ignores unknown fields). Single-threaded; the object must outlive
// the reader (it borrows the parser's DOM).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "simdjson.h"

#include "api/request_body.h"

namespace switchyard::api::internal {

// The calling thread's request parser, lent for one parse: a fresh simdjson parser allocates
// its buffers (text, tape, structural indexes) on every request, a reused one only when a body
// outgrows them. Keep the lease while reading the object parsed into it. A lease taken while
// the thread's parser is lent (a parse inside a parse) gets a parser of its own; a parser
// grown past kMaxKeptBytes by a large body is let go when its lease ends.
class ParserLease {
 public:
  ParserLease();
  ~ParserLease();
  ParserLease(const ParserLease&) = delete;
  ParserLease& operator=(const ParserLease&) = delete;

  simdjson::dom::parser* get() { return parser_; }

  static constexpr size_t kMaxKeptBytes = 64 << 10;

 private:
  std::unique_ptr<simdjson::dom::parser> own_;  // nested lease only
  simdjson::dom::parser* parser_;
};

class FieldReader;

// Parses a request `body` into `parser`, in place when the body has the spare room, and lists
// the root object's fields in `fields`: a body over `max_body_bytes` is 413 (PayloadTooLarge);
// malformed JSON, nesting over `max_depth`, a non-object root and duplicate keys are
// InvalidArgument; so are numbers beyond what the parser holds (1e999, integers past 64 bits),
// naming their field (number_fault.h). Every request parser starts here.
// REQUIRES: `fields` is default-constructed and unused.
absl::Status ParseRequestFields(RequestBody body, size_t max_body_bytes, size_t max_depth,
                                simdjson::dom::parser* parser, FieldReader* fields);

// Minified JSON text of `value`, for fields passed through raw (tools, kv_transfer_params).
std::string RawJson(simdjson::dom::element value);

// Reads an integer (an integral float such as 2.0 is accepted, like Pydantic) in [lo, hi].
absl::StatusOr<int64_t> ReadInt(simdjson::dom::element value, std::string_view param, int64_t lo,
                                int64_t hi);
// Reads a finite number.
absl::StatusOr<double> ReadDouble(simdjson::dom::element value, std::string_view param);
absl::StatusOr<std::string_view> ReadString(simdjson::dom::element value, std::string_view param);
// A token id: an integer in [0, 2^31).
absl::StatusOr<int32_t> ReadTokenId(simdjson::dom::element value, std::string_view param);

class FieldReader {
 public:
  FieldReader() = default;  // no fields: for ParseRequestFields to fill
  explicit FieldReader(simdjson::dom::object object) { List(object); }

  // Duplicate keys are rejected: a proxy and the server must never see different values.
  // Keys whose KeyBits all differ are distinct, so most objects pass without a compare.
  absl::Status CheckNoDuplicateKeys() const {
    return keys_share_bits_ ? CompareKeys() : absl::OkStatus();
  }

  // The value of `key`, or nullopt when absent or JSON null. Marks `key` as known.
  std::optional<simdjson::dom::element> Get(std::string_view key) {
    if (Absent(key))
      return std::nullopt;
    return Find(key);
  }

  // Each leaves *out unchanged when the field is absent or null. Inline up to the KeyBit test:
  // a parser asks for many absent keys, and with a literal key the test is one AND.
  absl::Status Bool(std::string_view key, bool* out) {
    return Absent(key) ? absl::OkStatus() : BoolPresent(key, out);
  }
  absl::Status Int(std::string_view key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
    return Absent(key) ? absl::OkStatus() : IntPresent(key, lo, hi, out);
  }
  absl::Status Double(std::string_view key, std::optional<double>* out) {
    return Absent(key) ? absl::OkStatus() : DoublePresent(key, out);
  }
  absl::Status String(std::string_view key, std::string* out) {
    return Absent(key) ? absl::OkStatus() : StringPresent(key, out);
  }
  // A string or an array of strings, at most `max_items`.
  absl::Status StringOrList(std::string_view key, size_t max_items, std::vector<std::string>* out) {
    return Absent(key) ? absl::OkStatus() : StringOrListPresent(key, max_items, out);
  }
  // An array of token ids, at most `max_items`.
  absl::Status TokenIds(std::string_view key, size_t max_items, std::vector<int32_t>* out) {
    return Absent(key) ? absl::OkStatus() : TokenIdsPresent(key, max_items, out);
  }

  // Keys present in the object that no getter asked for, in document order.
  std::vector<std::string> UnknownKeys() const;

 private:
  friend absl::Status ParseRequestFields(RequestBody body, size_t max_body_bytes, size_t max_depth,
                                         simdjson::dom::parser* parser, FieldReader* fields);

  struct Field {
    std::string_view key;
    simdjson::dom::element value;
    bool read = false;  // a getter asked for it
  };

  // One of 64 bits, from the key's length and first and last bytes: keys that differ there
  // mostly get different bits.
  static uint64_t KeyBit(std::string_view key) {
    if (key.empty())
      return 1;
    const size_t mix = key.size() * 5 + static_cast<unsigned char>(key.front()) +
                       size_t{static_cast<unsigned char>(key.back())} * 3;
    return uint64_t{1} << (mix & 63);
  }

  // Lists the object's fields: the one walk of its DOM. REQUIRES: none listed yet.
  void List(simdjson::dom::object object);

  // CheckNoDuplicateKeys past the KeyBit test: sorts the keys and compares neighbours.
  absl::Status CompareKeys() const;

  // No field has key's KeyBit: `key` is surely absent.
  bool Absent(std::string_view key) const { return (present_keys_ & KeyBit(key)) == 0; }

  // The getters past the KeyBit test (the key may still be absent).
  absl::Status BoolPresent(std::string_view key, bool* out);
  absl::Status IntPresent(std::string_view key, int64_t lo, int64_t hi,
                          std::optional<int64_t>* out);
  absl::Status DoublePresent(std::string_view key, std::optional<double>* out);
  absl::Status StringPresent(std::string_view key, std::string* out);
  absl::Status StringOrListPresent(std::string_view key, size_t max_items,
                                   std::vector<std::string>* out);
  absl::Status TokenIdsPresent(std::string_view key, size_t max_items, std::vector<int32_t>* out);

  // Get past the filter: scans the fields.
  std::optional<simdjson::dom::element> Find(std::string_view key);

  // The object's fields in document order, listed once: a request parser asks for some forty
  // keys, most of them absent, and walking the DOM for each costs more than this list.
  absl::InlinedVector<Field, 16> fields_;
  // The union of the fields' KeyBits: a key whose bit is clear is absent, found with one AND
  // and no scan.
  uint64_t present_keys_ = 0;
  // Two fields have the same KeyBit: their keys may be equal.
  bool keys_share_bits_ = false;
};

}  // namespace switchyard::api::internal
