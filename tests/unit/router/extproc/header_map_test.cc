#include "router/extproc/header_map.h"

#include <string>

#include "gtest/gtest.h"

namespace switchyard::router::extproc {
namespace {

void Add(envoy::config::core::v3::HeaderMap* map, const std::string& key,
         const std::string& raw_value, const std::string& value = "") {
  envoy::config::core::v3::HeaderValue* h = map->add_headers();
  h->set_key(key);
  h->set_raw_value(raw_value);
  h->set_value(value);
}

TEST(RequestFromHeaders, PseudoHeadersGiveMethodAndTarget) {
  envoy::config::core::v3::HeaderMap map;
  Add(&map, ":method", "POST");
  Add(&map, ":path", "/v1/completions?x=1");
  Add(&map, ":authority", "gateway");
  Add(&map, "content-type", "application/json");
  const net::HttpRequest r = RequestFromHeaders(map);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.query, "x=1");
  ASSERT_EQ(r.headers.size(), 1u);  // :authority is dropped
  EXPECT_EQ(r.Header("content-type"), "application/json");
}

TEST(RequestFromHeaders, RawValueWinsAndNamesAreLowerCased) {
  envoy::config::core::v3::HeaderMap map;
  Add(&map, "Authorization", "Bearer raw", "Bearer old");
  Add(&map, "x-session-id", "", "from-value");
  const net::HttpRequest r = RequestFromHeaders(map);
  EXPECT_EQ(r.Header("authorization"), "Bearer raw");
  EXPECT_EQ(r.Header("x-session-id"), "from-value");
}

TEST(RequestFromHeaders, NoPathIsEmptyTarget) {
  envoy::config::core::v3::HeaderMap map;
  Add(&map, ":method", "GET");
  const net::HttpRequest r = RequestFromHeaders(map);
  EXPECT_EQ(r.target, "");
  EXPECT_EQ(r.path, "");
  EXPECT_TRUE(r.headers.empty());
}

}  // namespace
}  // namespace switchyard::router::extproc
