#include "kube/watch_event.h"

#include "gtest/gtest.h"

#include "kube/inference_pool.h"
#include "kube/kube_object.h"
#include "kube/pod.h"

namespace switchyard::kube {
namespace {

TEST(WatchEventTest, DecodesEachType) {
  absl::StatusOr<WatchEvent> added = DecodeWatchEvent(
      R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"17"}}})");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->type, WatchEventType::kAdded);
  EXPECT_EQ(added->object.Key(), "ns/p");
  EXPECT_EQ(added->object.resource_version, "17");
  EXPECT_TRUE(added->object.value.is_object());

  absl::StatusOr<WatchEvent> bookmark = DecodeWatchEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"42"}}})");
  ASSERT_TRUE(bookmark.ok()) << bookmark.status();
  EXPECT_EQ(bookmark->type, WatchEventType::kBookmark);
  EXPECT_EQ(bookmark->object.resource_version, "42");

  absl::StatusOr<WatchEvent> gone = DecodeWatchEvent(
      R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 1, current 5","reason":"Expired","code":410}})");
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_TRUE(gone->gone());
  EXPECT_EQ(gone->error_message, "too old resource version: 1, current 5");

  absl::StatusOr<WatchEvent> other =
      DecodeWatchEvent(R"({"type":"ERROR","object":{"kind":"Status","code":500}})");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->gone());

  for (const char* type : {"MODIFIED", "DELETED"}) {
    absl::StatusOr<WatchEvent> e =
        DecodeWatchEvent(std::string(R"({"type":")") + type +
                         R"(","object":{"metadata":{"name":"n","resourceVersion":"1"}}})");
    ASSERT_TRUE(e.ok()) << type;
  }
}

TEST(WatchEventTest, RefusesMalformedLines) {
  for (const char* line :
       {"", "not json", "[]", R"({"object":{}})", R"({"type":"ADDED"})",
        R"({"type":"SURPRISE","object":{"metadata":{"name":"n","resourceVersion":"1"}}})",
        R"({"type":"ADDED","object":"text"})", R"({"type":"ADDED","object":{}})",
        R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"1"}}})",
        R"({"type":"ADDED","object":{"metadata":{"name":"n"}}})",
        R"({"type":"ADDED","object":{"metadata":{"name":5,"resourceVersion":"1"}}})"}) {
    EXPECT_EQ(DecodeWatchEvent(line).status().code(), absl::StatusCode::kInvalidArgument) << line;
  }
}

TEST(ObjectListTest, DecodesItemsSharingOneDocument) {
  absl::StatusOr<ObjectList> list = DecodeObjectList(
      R"({"kind":"PodList","metadata":{"resourceVersion":"99"},"items":[
        {"metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}},
        {"metadata":{"name":"b","namespace":"ns","resourceVersion":"7"}}]})");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->resource_version, "99");
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1].Key(), "ns/b");
  EXPECT_EQ(list->items[0].document, list->items[1].document);

  absl::StatusOr<ObjectList> empty =
      DecodeObjectList(R"({"metadata":{"resourceVersion":"3"},"items":null})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->items.empty());

  EXPECT_FALSE(DecodeObjectList(R"({"items":[]})").ok());
  EXPECT_FALSE(DecodeObjectList(R"({"metadata":{"resourceVersion":"3"},"items":[1]})").ok());
  EXPECT_FALSE(
      DecodeObjectList(R"({"metadata":{"resourceVersion":"3"},"items":[{"metadata":{}}]})").ok());
}

KubeObject Object(const std::string& json) {
  absl::StatusOr<WatchEvent> event = DecodeWatchEvent(R"({"type":"ADDED","object":)" + json + "}");
  EXPECT_TRUE(event.ok()) << event.status();
  return event->object;
}

TEST(PodTest, ReadyNeedsRunningReadyAnIpAndNoDeletion) {
  const std::string ready_status =
      R"("status":{"phase":"Running","podIP":"10.0.0.7","conditions":[{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"True"}]})";
  absl::StatusOr<Pod> pod = DecodePod(Object(
      R"({"metadata":{"name":"p","namespace":"ns","resourceVersion":"1","labels":{"app":"x","llm-d.ai/role":"decode"}},)" +
      ready_status + "}"));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_TRUE(pod->ready);
  EXPECT_EQ(pod->name, "p");
  EXPECT_EQ(pod->ip, "10.0.0.7");
  EXPECT_EQ(pod->labels.at("llm-d.ai/role"), "decode");

  const std::string meta = R"({"metadata":{"name":"p","resourceVersion":"1"},)";
  for (
      const std::string& status :
      {std::string(
           R"("status":{"phase":"Pending","podIP":"10.0.0.7","conditions":[{"type":"Ready","status":"True"}]})"),
       std::string(
           R"("status":{"phase":"Running","podIP":"10.0.0.7","conditions":[{"type":"Ready","status":"False"}]})"),
       std::string(
           R"("status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]})"),
       std::string(R"("status":{"phase":"Running","podIP":"10.0.0.7"})"),
       std::string(R"("spec":{})")}) {
    absl::StatusOr<Pod> p = DecodePod(Object(meta + status + "}"));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->ready) << status;
  }
  absl::StatusOr<Pod> deleting = DecodePod(Object(
      R"({"metadata":{"name":"p","resourceVersion":"1","deletionTimestamp":"2026-01-01T00:00:00Z"},)" +
      ready_status + "}"));
  ASSERT_TRUE(deleting.ok());
  EXPECT_FALSE(deleting->ready);

  EXPECT_FALSE(
      DecodePod(Object(R"({"metadata":{"name":"p","resourceVersion":"1","labels":{"a":1}}})"))
          .ok());
  EXPECT_FALSE(
      DecodePod(Object(R"({"metadata":{"name":"p","resourceVersion":"1"},"status":{"podIP":7}})"))
          .ok());
}

TEST(InferencePoolTest, ReadsSelectorAndPorts) {
  absl::StatusOr<InferencePool> pool = DecodeInferencePool(Object(
      R"({"metadata":{"name":"ip","namespace":"ns","resourceVersion":"1"},"spec":{"selector":{"matchLabels":{"b":"2","a":"1"}},"targetPorts":[{"number":8000},{"number":8001}],"endpointPickerRef":{"name":"epp"}}})"));
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->LabelSelector(), "a=1,b=2");
  EXPECT_EQ(pool->target_ports, (std::vector<int>{8000, 8001}));

  const std::string meta = R"({"metadata":{"name":"ip","resourceVersion":"1"},"spec":)";
  for (const char* spec :
       {R"({})", R"({"selector":{"matchLabels":{}},"targetPorts":[{"number":1}]})",
        R"({"selector":{"matchLabels":{"a":"1"}},"targetPorts":[]})",
        R"({"selector":{"matchLabels":{"a":"1"}},"targetPorts":[{"number":0}]})",
        R"({"selector":{"matchLabels":{"a":"1"}},"targetPorts":[{"port":80}]})"}) {
    EXPECT_EQ(DecodeInferencePool(Object(meta + spec + "}")).status().code(),
              absl::StatusCode::kInvalidArgument)
        << spec;
  }
}

}  // namespace
}  // namespace switchyard::kube
