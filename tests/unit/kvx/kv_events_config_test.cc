#include "kvx/kv_events_config.h"

#include <string>

#include "gtest/gtest.h"

namespace switchyard::kvx {
namespace {

EventLayout LayoutOf(const std::string& layout_json) {
  auto options = ParseKvEventsConfig(R"({"enable_kv_cache_events": true)" + layout_json + "}");
  EXPECT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options.ok() && options->has_value());
  return options.ok() && options->has_value() ? (*options)->encoding.layout : EventLayout::kArray;
}

TEST(KvEventsConfigTest, EventLayoutNamesEachVllmLayout) {
  EXPECT_EQ(LayoutOf(""), EventLayout::kMap);  // vLLM 0.32/0.33
  EXPECT_EQ(LayoutOf(R"(, "event_layout": "map")"), EventLayout::kMap);
  EXPECT_EQ(LayoutOf(R"(, "event_layout": "array")"), EventLayout::kArray);
  EXPECT_EQ(LayoutOf(R"(, "event_layout": "map_batch")"), EventLayout::kMapBatch);
}

TEST(KvEventsConfigTest, UnknownLayoutNamesTheChoices) {
  auto options = ParseKvEventsConfig(R"({"enable_kv_cache_events": true, "event_layout": "x"})");
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().message(),
            R"(--kv-events-config: event_layout: expected "array", "map" or "map_batch")");
}

}  // namespace
}  // namespace switchyard::kvx
