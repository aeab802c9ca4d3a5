#include "router/engine_metrics.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

#include "router/prometheus_text.h"

namespace switchyard::router {
namespace {

TEST(PrometheusTextTest, ParsesSamplesLabelsEscapesAndSpecialValues) {
  auto samples = ParsePrometheusText(
      "# HELP x help\n# TYPE x gauge\n"
      "x 1\n"
      "y{a=\"1\",b=\"q\\\"uote\\\\n\\n\"} 2.5e3 1700000000000\n"
      "z{} NaN\n"
      "w +Inf\r\n"
      "\n   \n");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 4u);
  EXPECT_EQ((*samples)[0].name, "x");
  EXPECT_EQ((*samples)[0].value, 1);
  EXPECT_EQ((*samples)[1].Label("a"), "1");
  EXPECT_EQ((*samples)[1].Label("b"), "q\"uote\\n\n");
  EXPECT_EQ((*samples)[1].value, 2500);
  EXPECT_TRUE(std::isnan((*samples)[2].value));
  EXPECT_TRUE(std::isinf((*samples)[3].value));
}

TEST(PrometheusTextTest, MalformedLinesNameTheLine) {
  for (const char* bad : {"x", "x{a=1} 2", "x{a=\"1\" 2", "x 1 2 3", "1x 2", "x{a=\"\\q\"} 1",
                          "x abc", "x{=\"1\"} 1", "x-y 1", "x.y{a=\"1\"} 1"}) {
    auto s = ParsePrometheusText(std::string("ok 1\n") + bad + "\n");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(std::string(s.status().message()).find("line 2"), std::string::npos)
        << s.status().message();
  }
  auto many = ParsePrometheusText("a 1\nb 2\nc 3\n", 2);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(EngineMetricsTest, VllmNamesAndDataParallelSeries) {
  auto samples = ParsePrometheusText(
      "vllm:num_requests_waiting{engine=\"0\"} 3\n"
      "vllm:num_requests_waiting{engine=\"1\"} 2\n"
      "vllm:num_requests_running{engine=\"0\"} 7\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n"
      "vllm:gpu_cache_usage_perc 0.9\n"
      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"} 1\n");
  ASSERT_TRUE(samples.ok());
  auto m = ExtractEndpointMetrics(EngineKind::kVllm, *samples);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->waiting_requests, 5);
  EXPECT_EQ(m->running_requests, 7);
  EXPECT_DOUBLE_EQ(m->kv_cache_usage, 0.5);
  EXPECT_EQ(m->block_size, 16);
  EXPECT_EQ(m->num_gpu_blocks, 4096);
}

TEST(EngineMetricsTest, OtherEnginesAndMissingGauges) {
  auto sglang = ParsePrometheusText(
      "sglang:num_queue_reqs 4\nsglang:num_running_reqs 1\nsglang:token_usage 0.3\n"
      "sglang:cache_config_info{page_size=\"1\",num_pages=\"100\"} 1\n");
  auto m = ExtractEndpointMetrics(EngineKind::kSglang, *sglang);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->waiting_requests, 4);
  EXPECT_DOUBLE_EQ(m->kv_cache_usage, 0.3);
  EXPECT_EQ(m->num_gpu_blocks, 100);

  auto llama =
      ParsePrometheusText("llamacpp:requests_deferred 2\nllamacpp:requests_processing 1\n");
  auto l = ExtractEndpointMetrics(EngineKind::kLlamaCpp, *llama);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->waiting_requests, 2);
  EXPECT_EQ(l->running_requests, 1);
  EXPECT_DOUBLE_EQ(l->kv_cache_usage, 0.0);

  auto wrong = ExtractEndpointMetrics(EngineKind::kVllm, *llama);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseEngineKind("tgi").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EngineMetricsTest, SglangPageWithDataParallelRanks) {
  // The shape SGLang serves with --dp 2 and --enable-metrics: labelled gauges, one series per
  // data-parallel rank, among series the router does not read.
  const std::string page =
      "# TYPE sglang:num_running_reqs gauge\n"
      "sglang:num_running_reqs{dp_rank=\"0\",engine_type=\"unified\",model_name=\"m\","
      "pp_rank=\"0\",tp_rank=\"0\"} 3.0\n"
      "sglang:num_running_reqs{dp_rank=\"1\",engine_type=\"unified\",model_name=\"m\","
      "pp_rank=\"0\",tp_rank=\"0\"} 2.0\n"
      "# TYPE sglang:num_queue_reqs gauge\n"
      "sglang:num_queue_reqs{dp_rank=\"0\",model_name=\"m\"} 0.0\n"
      "sglang:num_queue_reqs{dp_rank=\"1\",model_name=\"m\"} 6.0\n"
      "# TYPE sglang:token_usage gauge\n"
      "sglang:token_usage{dp_rank=\"0\",model_name=\"m\"} 0.25\n"
      "sglang:token_usage{dp_rank=\"1\",model_name=\"m\"} 0.75\n"
      "# TYPE sglang:cache_hit_rate gauge\n"
      "sglang:cache_hit_rate{dp_rank=\"0\",model_name=\"m\"} 0.5\n"
      "# TYPE sglang:time_to_first_token_seconds histogram\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 4.0\n";
  absl::StatusOr<EndpointMetrics> m = ParseEndpointMetrics(EngineKind::kSglang, page);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->running_requests, 5);
  EXPECT_EQ(m->waiting_requests, 6);
  EXPECT_DOUBLE_EQ(m->kv_cache_usage, 0.75);  // the fullest rank
  EXPECT_EQ(m->num_gpu_blocks, 0);            // no cache_config_info on this page
}

TEST(PrometheusTextTest, NameFilterChecksOnlyTheKeptSeries) {
  const std::string text =
      "# TYPE h histogram\n"
      "h_bucket{le=\"0.5\",model=\"m\"} 3\n"
      "keep{a=\"x\\\"y\"} +1.5\n"
      "h_bucket{le=\"+Inf\",model=\"m\"} 4\n"
      "keep 0x10\n";
  const auto keep = [](std::string_view name) { return name == "keep"; };
  auto kept = ParsePrometheusText(text, keep);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->size(), 2u);
  EXPECT_EQ((*kept)[0].name, "keep");
  EXPECT_EQ((*kept)[0].Label("a"), "x\"y");
  EXPECT_EQ((*kept)[0].value, 1.5);
  EXPECT_EQ((*kept)[1].value, 16);
  // Another series' line is read only up to its name: a malformed one, or one with an
  // OpenMetrics exemplar, does not fail the text.
  auto skipped = ParsePrometheusText(
      text + "h_bucket{le=\"1\" 2\nh_bucket{le=\"2\"} 5 # {trace_id=\"a\"} 0.5 1.7e9\n", keep);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->size(), 2u);
  // A malformed kept line is an error, and so is a line without a name.
  auto bad = ParsePrometheusText(text + "keep{a=\"1\" 2\n", keep);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("line 6"), std::string::npos);
  auto nameless = ParsePrometheusText(text + "{a=\"1\"} 2\n", keep);
  ASSERT_FALSE(nameless.ok());
  EXPECT_NE(std::string(nameless.status().message()).find("line 6"), std::string::npos);
  // The sample limit counts every sample, kept or not.
  EXPECT_EQ(ParsePrometheusText(text, keep, 3).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(EngineMetricsTest, ParseEndpointMetricsMatchesExtractOverTheWholeText) {
  const std::string text =
      "# HELP vllm:num_requests_waiting waiting\n"
      "vllm:num_requests_waiting{engine=\"0\"} 3\n"
      "vllm:e2e_request_latency_seconds_bucket{le=\"0.3\",model_name=\"m\"} 9\n"
      "vllm:num_requests_running{engine=\"0\"} 7\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"4096\"} 1\n";
  auto parsed = ParseEndpointMetrics(EngineKind::kVllm, text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto samples = ParsePrometheusText(text);
  ASSERT_TRUE(samples.ok());
  auto extracted = ExtractEndpointMetrics(EngineKind::kVllm, *samples);
  ASSERT_TRUE(extracted.ok());
  EXPECT_EQ(parsed->waiting_requests, extracted->waiting_requests);
  EXPECT_EQ(parsed->running_requests, extracted->running_requests);
  EXPECT_DOUBLE_EQ(parsed->kv_cache_usage, extracted->kv_cache_usage);
  EXPECT_EQ(parsed->block_size, 16);
  EXPECT_EQ(parsed->num_gpu_blocks, 4096);
  EXPECT_EQ(ParseEndpointMetrics(EngineKind::kVllm, text + "vllm:num_requests_running{ 1\n")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A broken line of a series the router does not read is no reason to fail the scrape.
  EXPECT_TRUE(ParseEndpointMetrics(EngineKind::kVllm, text + "x{ 1\n").ok());
  EXPECT_EQ(ParseEndpointMetrics(EngineKind::kSglang, text).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace switchyard::router
