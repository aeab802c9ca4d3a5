#include "kvx/kv_event_codec.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "base/json.h"

namespace switchyard::kvx {
namespace {

constexpr char kGoldenPath[] = SY_SOURCE_DIR "/tests/data/golden/kv_events.json";

std::string Unhex(std::string_view hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return out;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

// Block hash i of the golden cases (tools/gen_kv_event_golden.py digest()), as it reads back
// from the wire in `form`.
EventHash Digest(int i, HashForm form = HashForm::kBytes) {
  std::vector<uint8_t> bytes;
  for (int k = 0; k < 32; ++k)
    bytes.push_back(static_cast<uint8_t>((i * 37 + k * 11) & 0xff));
  const EventHash hash = EventHash::FromBytes(bytes);
  return form == HashForm::kInt ? EventHash::FromInt(hash.AsUint64()) : hash;
}

std::vector<EventHash> Digests(std::initializer_list<int> ids, HashForm form) {
  std::vector<EventHash> out;
  for (int i : ids)
    out.push_back(Digest(i, form));
  return out;
}

BlockStored Stored(std::initializer_list<int> ids, std::optional<int> parent,
                   std::vector<int32_t> tokens, int32_t block_size, HashForm form) {
  BlockStored e;
  e.block_hashes = Digests(ids, form);
  if (parent.has_value())
    e.parent_block_hash = Digest(*parent, form);
  e.token_ids = std::move(tokens);
  e.block_size = block_size;
  e.medium = kMediumGpu;
  return e;
}

BlockRemoved Removed(std::initializer_list<int> ids, HashForm form) {
  BlockRemoved e;
  e.block_hashes = Digests(ids, form);
  e.medium = kMediumGpu;
  return e;
}

// The golden cases of tools/gen_kv_event_golden.py.
KvEventBatch Case(std::string_view name, HashForm form) {
  KvEventBatch b;
  if (name == "stored_first_blocks") {
    b = {1700000000.25, {Stored({1, 2}, std::nullopt, {0, 1, 2, 3, 4, 5, 6, 7}, 4, form)}, 0};
  } else if (name == "stored_chained_lora") {
    BlockStored e = Stored({4}, 3, {70000, 1, 200, 65536}, 4, form);
    e.lora_id = 3;
    e.lora_name = "adapter-a";
    e.extra_keys_msgpack = std::string(
        "\x91\x92\xa9"
        "adapter-a"
        "\xa4"
        "salt");
    e.group_idx = 0;
    e.kv_cache_spec_kind = "full_attention";
    e.kv_cache_spec_sliding_window = 4096;
    b = {1764480000.123456, {e}, 1};
  } else if (name == "removed") {
    b = {1.5, {Removed({5, 6, 7}, form)}, 0};
  } else if (name == "removed_cpu_group") {
    BlockRemoved e = Removed({8}, form);
    e.medium = kMediumCpu;
    e.group_idx = 2;
    b = {2.0, {e}, std::nullopt};
  } else if (name == "all_cleared") {
    b = {3.0, {AllBlocksCleared{}}, 0};
  } else if (name == "mixed") {
    b = {1764480001.5,
         {Stored({9}, std::nullopt, {5, 6}, 2, form), Removed({9}, form), AllBlocksCleared{}},
         std::nullopt};
  } else {
    ADD_FAILURE() << "unknown golden case " << name;
  }
  return b;
}

struct Golden {
  std::string name;
  KvEventEncoding encoding;
  std::string bytes;
};

std::vector<Golden> LoadGolden() {
  auto doc = base::JsonDocument::ParseFile(kGoldenPath);
  EXPECT_TRUE(doc.ok()) << doc.status();
  std::vector<Golden> out;
  if (!doc.ok())
    return out;
  for (simdjson::dom::element c : simdjson::dom::array((*doc)->root()["cases"])) {
    Golden g;
    g.name = std::string(std::string_view(c["name"]));
    auto layout = ParseEventLayout(std::string_view(c["layout"]));
    EXPECT_TRUE(layout.ok()) << layout.status();
    g.encoding.layout = layout.value_or(EventLayout::kArray);
    g.encoding.hashes = std::string_view(c["hashes"]) == "int" ? HashForm::kInt : HashForm::kBytes;
    g.bytes = Unhex(std::string_view(c["hex"]));
    out.push_back(std::move(g));
  }
  return out;
}

std::string Label(const Golden& g) {
  return g.name + "/" + std::string(EventLayoutName(g.encoding.layout)) +
         (g.encoding.hashes == HashForm::kInt ? "/int" : "/bytes");
}

// Golden bytes come from tools/gen_kv_event_golden.py: msgspec Structs declared like vLLM's
// for each layout (tests/e2e/vllm_kv_structs.py), cross-checked there by hand with msgpack.
TEST(KvEventCodecGoldenTest, EncodesLikeVllm) {
  const std::vector<Golden> golden = LoadGolden();
  ASSERT_EQ(golden.size(), 36u);  // 6 cases x 3 layouts x 2 hash forms
  for (const Golden& g : golden) {
    SCOPED_TRACE(Label(g));
    EXPECT_EQ(Hex(EncodeKvEventBatch(Case(g.name, HashForm::kBytes), g.encoding)), Hex(g.bytes));
  }
}

TEST(KvEventCodecGoldenTest, DecodesAndReencodesVllmBytes) {
  for (const Golden& g : LoadGolden()) {
    SCOPED_TRACE(Label(g));
    auto batch = DecodeKvEventBatch(g.bytes);
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(*batch, Case(g.name, g.encoding.hashes));
    EXPECT_EQ(Hex(EncodeKvEventBatch(*batch, g.encoding)), Hex(g.bytes));
  }
}

// The first bytes tell the layouts apart: 0x93 = batch array, then float64 ts (0xcb), then
// the events array, whose first event is an array (0x9_) or a map (0x8_).
TEST(KvEventCodecGoldenTest, LayoutsDifferWhereVllmsDiffer) {
  int seen = 0;
  for (const Golden& g : LoadGolden()) {
    if (g.name != "removed" || g.encoding.hashes != HashForm::kInt)
      continue;
    SCOPED_TRACE(Label(g));
    ++seen;
    const std::string hex = Hex(g.bytes);
    switch (g.encoding.layout) {
      case EventLayout::kArray:  // [1.5, [["BlockRemoved", ...
        EXPECT_EQ(hex.substr(0, 26),
                  "93cb3ff800000000000091"
                  "94ac");
        break;
      case EventLayout::kMap:  // [1.5, [{"type": "BlockRemoved", ...
        EXPECT_EQ(hex.substr(0, 30),
                  "93cb3ff800000000000091"
                  "83a47479");
        break;
      case EventLayout::kMapBatch:  // {"ts": 1.5, "events": [{"type": ...
        EXPECT_EQ(hex.substr(0, 10), "83a27473cb");
        break;
    }
  }
  EXPECT_EQ(seen, 3);
}

TEST(KvEventCodecTest, LayoutNamesRoundTrip) {
  for (EventLayout layout : {EventLayout::kArray, EventLayout::kMap, EventLayout::kMapBatch}) {
    auto parsed = ParseEventLayout(EventLayoutName(layout));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, layout);
  }
  EXPECT_EQ(EventLayoutName(EventLayout::kMapBatch), "map_batch");
  auto bad = ParseEventLayout("tagged");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("\"map_batch\""), std::string::npos);
}

// vLLM main's batch map drops a None data_parallel_rank (omit_defaults); the array batches
// keep it as nil.
TEST(KvEventCodecTest, MapBatchOmitsAnUnsetRank) {
  KvEventBatch batch{2.0, {AllBlocksCleared{}}, std::nullopt};
  // {"ts": 2.0, "events": [{"type": "AllBlocksCleared"}]}
  EXPECT_EQ(Hex(EncodeKvEventBatch(batch, {EventLayout::kMapBatch, HashForm::kInt})),
            "82a27473cb4000000000000000a66576656e74739181a474797065b0416c6c426c6f636b73436c"
            "6561726564");
  batch.data_parallel_rank = 2;
  auto back = DecodeKvEventBatch(EncodeKvEventBatch(batch, {EventLayout::kMapBatch}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data_parallel_rank, 2);
}

TEST(KvEventCodecTest, DefaultsToVllmCurrentMapLayoutAndIntHashes) {
  const KvEventBatch batch = Case("removed", HashForm::kBytes);
  EXPECT_EQ(EncodeKvEventBatch(batch, {}),
            EncodeKvEventBatch(batch, {EventLayout::kMap, HashForm::kInt}));
}

TEST(KvEventCodecTest, EventHashIntegerFormIsTheLastEightBytes) {
  const EventHash digest = Digest(1);
  uint64_t expected = 0;
  for (size_t i = 24; i < 32; ++i)
    expected = expected << 8 | digest.bytes()[i];
  EXPECT_EQ(digest.AsUint64(), expected);
  const uint8_t short_hash[] = {0x01, 0x02};
  EXPECT_EQ(EventHash::FromBytes(short_hash).AsUint64(), 0x0102u);
  EXPECT_EQ(EventHash::FromInt(42).AsUint64(), 42u);
  EXPECT_NE(EventHash::FromInt(42), EventHash::FromBytes(EventHash::FromInt(42).bytes()));
}

// Older and newer vLLMs: the v0.9 batch [ts, events] with 5-field BlockStored and 1-field
// BlockRemoved; fields and keys this decoder does not know are ignored; SGLang's signed
// integer hashes.
TEST(KvEventCodecTest, AcceptsShortenedAndExtendedLayouts) {
  // [1.0, [["BlockStored", [7], nil, [1, 2], 2, nil], ["BlockRemoved", [-2]]]]
  const std::string v09 = Unhex(
      "92cb3ff0000000000000"
      "92"
      "96ab426c6f636b53746f7265649107c0920102"
      "02c0"
      "92ac426c6f636b52656d6f76656491fe");
  auto batch = DecodeKvEventBatch(v09);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->ts, 1.0);
  EXPECT_FALSE(batch->data_parallel_rank.has_value());
  ASSERT_EQ(batch->events.size(), 2u);
  const auto& stored = std::get<BlockStored>(batch->events[0]);
  EXPECT_EQ(stored.block_hashes, std::vector<EventHash>{EventHash::FromInt(7)});
  EXPECT_EQ(stored.token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(stored.medium.has_value());
  const auto& removed = std::get<BlockRemoved>(batch->events[1]);
  EXPECT_EQ(removed.block_hashes[0].AsUint64(), static_cast<uint64_t>(-2));

  // [0, [{"type": "BlockRemoved", "block_hashes": [1], "locality": "x"}, ["AllBlocksCleared", 5]],
  // 3, "future"]
  const std::string extended = Unhex(
      "9400"
      "92"
      "83a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391"
      "01"
      "a86c6f63616c697479a178"
      "92b0416c6c426c6f636b73436c656172656405"
      "03a6667574757265");
  batch = DecodeKvEventBatch(extended);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->data_parallel_rank, 3);
  ASSERT_EQ(batch->events.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(batch->events[1]));
}

void ExpectError(std::string_view hex, std::string_view needle) {
  auto batch = DecodeKvEventBatch(Unhex(hex));
  ASSERT_FALSE(batch.ok()) << hex;
  EXPECT_NE(std::string(batch.status().message()).find(needle), std::string::npos)
      << batch.status();
}

TEST(KvEventCodecTest, RejectsMalformedBatchesWithClearErrors) {
  ExpectError("", "not valid msgpack");
  ExpectError("93", "not valid msgpack");
  ExpectError("c1", "not valid msgpack");
  ExpectError("dd7fffffff", "not valid msgpack");  // 2^31-element array in 5 bytes
  ExpectError(
      "93000090"
      "00",
      "trailing bytes");
  ExpectError("c0", "batch: expected an array [ts, events, dp_rank] or a map, got nil");
  ExpectError("80", "ts: missing");
  ExpectError("81a27473cb3ff0000000000000", "events: missing");  // {"ts": 1.0}
  ExpectError("81a2747a0a", "ts: missing");                      // {"tz": 10}
  ExpectError("820000a66576656e747390", "batch key 0: expected str, got int");
  // {"ts": 0, "events": [], "data_parallel_rank": "x"}
  ExpectError("83a2747300a66576656e747390b2646174615f706172616c6c656c5f72616e6ba178",
              "data_parallel_rank: expected an int, got str");
  ExpectError("9100", "got 1 elements");
  ExpectError("93a1789000", "ts: expected a number, got str");
  ExpectError("930000c0", "events: expected an array, got int");
  ExpectError("930090a178", "data_parallel_rank: expected an int, got str");
  ExpectError("930090ff", "data_parallel_rank: -1 is out of range");
  ExpectError("93009101c0", "events[0]: expected an array or map event, got int");
  ExpectError("93009190c0", "events[0]: event has no type tag");
  ExpectError("93009191a3466f6fc0", "unknown event type \"Foo\"");
  // ["BlockStored", [1], nil, [1], 0]: block_size must be positive.
  ExpectError(
      "93009195ab426c6f636b53746f72656491"
      "01c0910100c0",
      "events[0] (BlockStored).block_size: 0 is out of range");
  // ["BlockStored", [1], nil] lacks token_ids.
  ExpectError(
      "93009193ab426c6f636b53746f72656491"
      "01c0c0",
      "(BlockStored).token_ids: missing");
  // A token id beyond int32.
  ExpectError(
      "93009195ab426c6f636b53746f72656491"
      "01c091ce8000000004c0",
      "token_ids[0]: 2147483648 is out of range");
  // A 33-byte hash.
  ExpectError(std::string("93009192ac426c6f636b52656d6f76656491c421") + std::string(66, '0') + "c0",
              "longer than 32 bytes");
  ExpectError("93009192ac426c6f636b52656d6f76656491a178c0",
              "block_hashes[0]: expected an int or bytes hash, got str");
  // Nesting past the parser's depth limit.
  ExpectError(std::string(2 * 40, '9'), "not valid msgpack");
}

// Every prefix of a valid payload is rejected, and no single-byte change crashes.
TEST(KvEventCodecTest, SurvivesTruncationAndCorruption) {
  for (const Golden& g : LoadGolden()) {
    SCOPED_TRACE(Label(g));
    for (size_t n = 0; n < g.bytes.size(); ++n)
      EXPECT_FALSE(DecodeKvEventBatch(std::string_view(g.bytes).substr(0, n)).ok()) << n;
    std::string corrupt = g.bytes;
    for (size_t i = 0; i < corrupt.size(); ++i) {
      for (uint8_t v : {0x00, 0x7f, 0x90, 0xc0, 0xc1, 0xc4, 0xd9, 0xdc, 0xdd, 0xde, 0xff}) {
        const char saved = corrupt[i];
        corrupt[i] = static_cast<char>(v);
        (void)DecodeKvEventBatch(corrupt).ok();
        corrupt[i] = saved;
      }
    }
  }
}

}  // namespace
}  // namespace switchyard::kvx
