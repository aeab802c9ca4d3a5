#include "engine/metrics.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

// One sample line of the text format, parsed.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value_text;
  double value = 0;
};

// A strict reader for what Serialize writes: `# HELP`/`# TYPE` lines, then samples
// `name{k="v",...} value` with \\, \" and \n escapes in label values.
struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> type

  explicit Exposition(const std::string& text) {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      EXPECT_NE(eol, std::string::npos) << "text must end with a newline";
      if (eol == std::string::npos) {
        eol = text.size();
      }
      Parse(text.substr(pos, eol - pos));
      pos = eol + 1;
    }
  }

  void Parse(const std::string& line) {
    if (line.rfind("# TYPE ", 0) == 0) {
      size_t space = line.find(' ', 7);
      types[line.substr(7, space - 7)] = line.substr(space + 1);
      return;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      return;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') {
      s.name += line[i++];
    }
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        size_t eq = line.find('=', i);
        std::string key = line.substr(i, eq - i);
        i = eq + 2;  // past ="
        std::string value;
        while (line[i] != '"') {
          if (line[i] == '\\') {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
          ++i;
        }
        s.labels[key] = value;
        ++i;  // past the closing quote
        if (line[i] == ',') {
          ++i;
        }
      }
      ++i;
    }
    EXPECT_EQ(line[i], ' ') << line;
    s.value_text = line.substr(i + 1);
    s.value = std::strtod(s.value_text.c_str(), nullptr);
    if (s.value_text == "+Inf") {
      s.value = HUGE_VAL;
    }
    samples.push_back(std::move(s));
  }

  // The samples named `name` whose labels include `labels`.
  std::vector<const Sample*> Find(const std::string& name,
                                  const std::map<std::string, std::string>& labels = {}) const {
    std::vector<const Sample*> found;
    for (const Sample& s : samples) {
      if (s.name != name) {
        continue;
      }
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        match = match && it != s.labels.end() && it->second == v;
      }
      if (match) {
        found.push_back(&s);
      }
    }
    return found;
  }

  double Value(const std::string& name,
               const std::map<std::string, std::string>& labels = {}) const {
    auto found = Find(name, labels);
    EXPECT_EQ(found.size(), 1u) << name;
    return found.empty() ? -1 : found[0]->value;
  }

  std::vector<std::string> BucketBounds(const std::string& family) const {
    std::vector<std::string> bounds;
    for (const Sample* s : Find(family + "_bucket")) {
      bounds.push_back(s->labels.at("le"));
    }
    return bounds;
  }

  double BucketCount(const std::string& family, const std::string& le) const {
    return Value(family + "_bucket", {{"le", le}});
  }
};

EngineMetricsOptions Options() {
  EngineMetricsOptions o;
  o.model_name = "tiny";
  o.engine_index = "3";
  o.max_model_len = 2048;
  o.block_size = 16;
  o.num_gpu_blocks = 512;
  return o;
}

TEST(EngineMetricsTest, EverySeriesCarriesModelAndEngine) {
  EngineMetrics metrics(Options());
  Exposition text(metrics.Serialize());
  ASSERT_FALSE(text.samples.empty());
  for (const Sample& s : text.samples) {
    EXPECT_EQ(s.labels.count("model_name"), 1u) << s.name;
    EXPECT_EQ(s.labels.count("engine"), 1u) << s.name;
    if (s.labels.count("model_name") == 0 || s.labels.count("engine") == 0) {
      continue;
    }
    EXPECT_EQ(s.labels.at("model_name"), "tiny") << s.name;
    EXPECT_EQ(s.labels.at("engine"), "3") << s.name;
  }
}

TEST(EngineMetricsTest, TypesAndCounterTotalSuffix) {
  EngineMetrics metrics(Options());
  const std::string raw = metrics.Serialize();
  Exposition text(raw);
  const std::map<std::string, std::string> expected_types = {
      {"vllm:num_requests_running", "gauge"},
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},
      {"vllm:cache_config_info", "gauge"},
      {"vllm:prefix_cache_queries_total", "counter"},
      {"vllm:prefix_cache_hits_total", "counter"},
      {"vllm:num_preemptions_total", "counter"},
      {"vllm:prompt_tokens_total", "counter"},
      {"vllm:prompt_tokens_by_source_total", "counter"},
      {"vllm:prompt_tokens_cached_total", "counter"},
      {"vllm:generation_tokens_total", "counter"},
      {"vllm:request_success_total", "counter"},
      {"vllm:request_prompt_tokens", "histogram"},
      {"vllm:request_generation_tokens", "histogram"},
      {"vllm:iteration_tokens_total", "histogram"},
      {"vllm:request_max_num_generation_tokens", "histogram"},
      {"vllm:request_params_n", "histogram"},
      {"vllm:request_params_max_tokens", "histogram"},
      {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"},
      {"vllm:request_time_per_output_token_seconds", "histogram"},
      {"vllm:e2e_request_latency_seconds", "histogram"},
      {"vllm:request_queue_time_seconds", "histogram"},
      {"vllm:request_inference_time_seconds", "histogram"},
      {"vllm:request_prefill_time_seconds", "histogram"},
      {"vllm:request_decode_time_seconds", "histogram"},
      {"vllm:request_prefill_kv_computed_tokens", "histogram"},
      {"switchyard:kv_transfer_loads_total", "counter"},
      {"switchyard:kv_transfer_leases_ended_total", "counter"},
      {"switchyard:kv_peer_pulls_total", "counter"},
      {"switchyard:kv_peer_lookups_total", "counter"},
      {"switchyard:kv_peer_lent_blocks_total", "counter"},
  };
  EXPECT_EQ(text.types, expected_types);
  // Counters: `# TYPE x_total counter` and samples x_total, as prometheus_client writes them.
  EXPECT_THAT(raw, HasSubstr("# TYPE vllm:prompt_tokens_total counter\n"));
  EXPECT_THAT(raw, HasSubstr("\nvllm:prompt_tokens_total{"));
  EXPECT_THAT(raw, Not(HasSubstr("\nvllm:prompt_tokens{")));
  for (const Sample& s : text.samples) {
    bool typed = false;
    for (const auto& [family, type] : expected_types) {
      if (type == "counter" && s.name == family) {
        typed = true;
      }
      if (type == "gauge" && s.name == family) {
        typed = true;
      }
      if (type == "histogram" && (s.name == family + "_bucket" || s.name == family + "_count" ||
                                  s.name == family + "_sum")) {
        typed = true;
      }
    }
    EXPECT_TRUE(typed) << "sample of no declared family: " << s.name;
  }
}

TEST(EngineMetricsTest, GaugesAndCountersHoldWhatWasRecorded) {
  EngineMetrics metrics(Options());
  metrics.SetSchedulerState(3, 2, 0.25);
  metrics.AddPrefixCache(100, 40);
  metrics.AddPrefixCache(28, 0);
  metrics.AddPreemptions(1);
  metrics.AddPromptTokens(100, 40, 0);
  metrics.AddPromptTokens(20, 0, 0);
  metrics.AddPromptTokens(50, 48, 32);  // a remote prefill delivered 32 of the 48
  metrics.AddGenerationTokens(7);
  metrics.AddGenerationTokens(1);
  metrics.AddKvTransferLoad(true);
  metrics.AddKvTransferLoad(true);
  metrics.AddKvTransferLoad(false);
  metrics.AddKvTransferLeaseEnded(/*expired=*/true);
  metrics.AddKvPeerPull(KvPeerPullOutcome::kLoaded);
  metrics.AddKvPeerPull(KvPeerPullOutcome::kMissed);
  metrics.AddKvPeerPull(KvPeerPullOutcome::kMissed);
  metrics.AddKvPeerLookup(6);
  metrics.AddKvPeerLookup(0);
  metrics.AddKvPeerLookup(3);
  Exposition text(metrics.Serialize());
  EXPECT_EQ(text.Value("vllm:num_requests_running"), 3);
  EXPECT_EQ(text.Value("vllm:num_requests_waiting"), 2);
  EXPECT_EQ(text.Value("vllm:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(text.Value("vllm:prefix_cache_queries_total"), 128);
  EXPECT_EQ(text.Value("vllm:prefix_cache_hits_total"), 40);
  EXPECT_EQ(text.Value("vllm:num_preemptions_total"), 1);
  EXPECT_EQ(text.Value("vllm:prompt_tokens_total"), 170);
  EXPECT_EQ(text.Value("vllm:prompt_tokens_cached_total"), 88);
  EXPECT_EQ(text.Value("vllm:prompt_tokens_by_source_total", {{"source", "local_compute"}}), 82);
  EXPECT_EQ(text.Value("vllm:prompt_tokens_by_source_total", {{"source", "local_cache_hit"}}), 56);
  EXPECT_EQ(text.Value("vllm:prompt_tokens_by_source_total", {{"source", "external_kv_transfer"}}),
            32);
  EXPECT_EQ(text.Value("vllm:generation_tokens_total"), 8);
  EXPECT_EQ(text.Value("switchyard:kv_transfer_loads_total", {{"outcome", "loaded"}}), 2);
  EXPECT_EQ(text.Value("switchyard:kv_transfer_loads_total", {{"outcome", "fell_back"}}), 1);
  EXPECT_EQ(text.Value("switchyard:kv_transfer_leases_ended_total", {{"how", "released"}}), 0);
  EXPECT_EQ(text.Value("switchyard:kv_transfer_leases_ended_total", {{"how", "expired"}}), 1);
  EXPECT_EQ(text.Value("switchyard:kv_peer_pulls_total", {{"outcome", "loaded"}}), 1);
  EXPECT_EQ(text.Value("switchyard:kv_peer_pulls_total", {{"outcome", "missed"}}), 2);
  EXPECT_EQ(text.Value("switchyard:kv_peer_pulls_total", {{"outcome", "fell_back"}}), 0);
  EXPECT_EQ(text.Value("switchyard:kv_peer_lookups_total", {{"outcome", "held"}}), 2);
  EXPECT_EQ(text.Value("switchyard:kv_peer_lookups_total", {{"outcome", "none"}}), 1);
  EXPECT_EQ(text.Value("switchyard:kv_peer_lent_blocks_total"), 9);
}

TEST(EngineMetricsTest, TheHostTierSeriesExistOnlyWithATier) {
  EXPECT_TRUE(Exposition(EngineMetrics(Options()).Serialize())
                  .Find("switchyard:kv_tier_capacity_blocks")
                  .empty());
  EngineMetricsOptions options = Options();
  options.kv_tier_media = {"CPU"};
  EngineMetrics metrics(options);
  KvTierStats stats;
  stats.capacity_blocks = 100;
  stats.used_blocks = 7;
  stats.query_tokens = 160;
  stats.hit_tokens = 96;
  stats.stored_blocks = 7;
  stats.store_bytes = 7 * 4096;
  stats.store_seconds = 0.5;
  stats.loads_done = 1;
  metrics.SetKvTier(stats);
  // Counters advance by the change since the last call; gauges take the value.
  stats.used_blocks = 9;
  stats.stored_blocks = 9;
  stats.store_bytes = 9 * 4096;
  stats.evicted_blocks = 1;
  stats.load_bytes = 6 * 4096;
  stats.loads_failed = 1;
  metrics.SetKvTier(stats);
  Exposition text(metrics.Serialize());
  const std::map<std::string, std::string> cpu = {{"medium", "CPU"}};
  EXPECT_EQ(text.Value("switchyard:kv_tier_capacity_blocks", cpu), 100);
  EXPECT_EQ(text.Value("switchyard:kv_tier_used_blocks", cpu), 9);
  EXPECT_EQ(text.Value("switchyard:kv_tier_queries_total", cpu), 160);
  EXPECT_EQ(text.Value("switchyard:kv_tier_hits_total", cpu), 96);
  EXPECT_EQ(text.Value("switchyard:kv_tier_stored_blocks_total", cpu), 9);
  EXPECT_EQ(text.Value("switchyard:kv_tier_evicted_blocks_total", cpu), 1);
  EXPECT_EQ(text.Value("switchyard:kv_tier_loads_total", {{"outcome", "loaded"}}), 1);
  EXPECT_EQ(text.Value("switchyard:kv_tier_loads_total", {{"outcome", "fell_back"}}), 1);
  EXPECT_EQ(text.Value("vllm:kv_offload_total_bytes_total", {{"transfer_type", "GPU_to_CPU"}}),
            9 * 4096);
  EXPECT_EQ(text.Value("vllm:kv_offload_total_bytes_total", {{"transfer_type", "CPU_to_GPU"}}),
            6 * 4096);
  EXPECT_EQ(text.Value("vllm:kv_offload_total_time_total", {{"transfer_type", "GPU_to_CPU"}}), 0.5);
}

TEST(EngineMetricsTest, ValuesAreWrittenAsPrometheusClientWritesThem) {
  EngineMetricsOptions options = Options();
  options.model_name = "we\"ird\\name\nx";
  EngineMetrics metrics(options);
  metrics.SetSchedulerState(3, 1000000, 0.25);
  metrics.AddGenerationTokens(1234567);
  metrics.ObserveTimeToFirstToken(0.00001);
  Exposition text(metrics.Serialize());
  EXPECT_EQ(text.Find("vllm:num_requests_running")[0]->value_text, "3.0");
  EXPECT_EQ(text.Find("vllm:num_requests_waiting")[0]->value_text, "1e+06");
  EXPECT_EQ(text.Find("vllm:kv_cache_usage_perc")[0]->value_text, "0.25");
  EXPECT_EQ(text.Find("vllm:generation_tokens_total")[0]->value_text, "1.234567e+06");
  EXPECT_EQ(text.Find("vllm:time_to_first_token_seconds_sum")[0]->value_text, "1e-05");
  EXPECT_EQ(text.Find("vllm:prefix_cache_hits_total")[0]->value_text, "0.0");
  // Escaped on the way out, read back intact.
  EXPECT_EQ(text.samples[0].labels.at("model_name"), "we\"ird\\name\nx");
}

TEST(EngineMetricsTest, HistogramBucketsAreVllms) {
  EngineMetrics metrics(Options());
  Exposition text(metrics.Serialize());
  EXPECT_THAT(
      text.BucketBounds("vllm:time_to_first_token_seconds"),
      ElementsAreArray({"0.001", "0.005", "0.01", "0.02",  "0.04",  "0.06",   "0.08", "0.1",
                        "0.25",  "0.5",   "0.75", "1.0",   "2.5",   "5.0",    "7.5",  "10.0",
                        "20.0",  "40.0",  "80.0", "160.0", "640.0", "2560.0", "+Inf"}));
  const std::vector<std::string> per_token = {
      "0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2",  "0.3",  "0.4",  "0.5",
      "0.75", "1.0",   "2.5",  "5.0",   "7.5", "10.0", "20.0", "40.0", "80.0", "+Inf"};
  EXPECT_EQ(text.BucketBounds("vllm:inter_token_latency_seconds"), per_token);
  EXPECT_EQ(text.BucketBounds("vllm:request_time_per_output_token_seconds"), per_token);
  const std::vector<std::string> request_latency = {
      "0.3",   "0.5",   "0.8",   "1.0",    "1.5",    "2.0",  "2.5",  "5.0",
      "10.0",  "15.0",  "20.0",  "30.0",   "40.0",   "50.0", "60.0", "120.0",
      "240.0", "480.0", "960.0", "1920.0", "7680.0", "+Inf"};
  for (const char* family :
       {"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
        "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds"}) {
    EXPECT_EQ(text.BucketBounds(family), request_latency) << family;
  }
  EXPECT_THAT(text.BucketBounds("vllm:iteration_tokens_total"),
              ElementsAreArray({"1.0", "8.0", "16.0", "32.0", "64.0", "128.0", "256.0", "512.0",
                                "1024.0", "2048.0", "4096.0", "8192.0", "16384.0", "+Inf"}));
  EXPECT_THAT(text.BucketBounds("vllm:request_params_n"),
              ElementsAreArray({"1.0", "2.0", "5.0", "10.0", "20.0", "+Inf"}));
  // build_1_2_5_buckets(2048).
  const std::vector<std::string> tokens_125 = {"1.0",   "2.0",    "5.0",    "10.0",
                                               "20.0",  "50.0",   "100.0",  "200.0",
                                               "500.0", "1000.0", "2000.0", "+Inf"};
  for (const char* family :
       {"vllm:request_prompt_tokens", "vllm:request_generation_tokens",
        "vllm:request_max_num_generation_tokens", "vllm:request_params_max_tokens",
        "vllm:request_prefill_kv_computed_tokens"}) {
    EXPECT_EQ(text.BucketBounds(family), tokens_125) << family;
  }
}

TEST(EngineMetricsTest, OneTwoFiveBucketsFollowMaxModelLen) {
  EngineMetricsOptions options = Options();
  options.max_model_len = 100;
  EngineMetrics metrics(options);
  EXPECT_THAT(Exposition(metrics.Serialize()).BucketBounds("vllm:request_prompt_tokens"),
              ElementsAreArray({"1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "+Inf"}));
}

TEST(EngineMetricsTest, HistogramObservationsLandInTheirBuckets) {
  EngineMetrics metrics(Options());
  metrics.ObserveTimeToFirstToken(0.05);
  metrics.ObserveTimeToFirstToken(3.0);
  metrics.ObserveInterTokenLatency(0.02);
  metrics.ObserveInterTokenLatency(0.02);
  metrics.ObserveInterTokenLatency(100.0);
  metrics.ObserveIterationTokens(8);
  metrics.ObserveIterationTokens(9);
  Exposition text(metrics.Serialize());
  const std::string ttft = "vllm:time_to_first_token_seconds";
  EXPECT_EQ(text.BucketCount(ttft, "0.04"), 0);
  EXPECT_EQ(text.BucketCount(ttft, "0.06"), 1);  // cumulative
  EXPECT_EQ(text.BucketCount(ttft, "2.5"), 1);
  EXPECT_EQ(text.BucketCount(ttft, "5.0"), 2);
  EXPECT_EQ(text.BucketCount(ttft, "+Inf"), 2);
  EXPECT_EQ(text.Value(ttft + "_count"), 2);
  EXPECT_DOUBLE_EQ(text.Value(ttft + "_sum"), 3.05);
  const std::string itl = "vllm:inter_token_latency_seconds";
  EXPECT_EQ(text.BucketCount(itl, "0.01"), 0);
  EXPECT_EQ(text.BucketCount(itl, "0.025"), 2);
  EXPECT_EQ(text.BucketCount(itl, "80.0"), 2);
  EXPECT_EQ(text.BucketCount(itl, "+Inf"), 3);
  const std::string iter = "vllm:iteration_tokens_total";
  EXPECT_EQ(text.BucketCount(iter, "8.0"), 1);  // le is inclusive
  EXPECT_EQ(text.BucketCount(iter, "16.0"), 2);
}

FinishedRequestStats Finished(FinishReason reason) {
  FinishedRequestStats s;
  s.finish_reason = reason;
  s.e2e_latency_s = 1.2;
  s.queued_time_s = 0.1;
  s.prefill_time_s = 0.2;
  s.decode_time_s = 0.9;
  s.inference_time_s = 1.1;
  s.num_prompt_tokens = 30;
  s.num_cached_tokens = 16;
  s.num_generation_tokens = 12;
  s.max_tokens_param = 64;
  s.n_param = 1;
  s.mean_time_per_output_token_s = 0.08;
  return s;
}

TEST(EngineMetricsTest, RequestSuccessCountsPerReason) {
  EngineMetrics metrics(Options());
  metrics.RecordFinishedRequest(Finished(FinishReason::kStop));
  metrics.RecordFinishedRequest(Finished(FinishReason::kStop));
  metrics.RecordFinishedRequest(Finished(FinishReason::kLength));
  Exposition text(metrics.Serialize());
  const std::string name = "vllm:request_success_total";
  EXPECT_EQ(text.Find(name).size(), 4u);  // every reason exists from the start
  EXPECT_EQ(text.Value(name, {{"finished_reason", "stop"}}), 2);
  EXPECT_EQ(text.Value(name, {{"finished_reason", "length"}}), 1);
  EXPECT_EQ(text.Value(name, {{"finished_reason", "abort"}}), 0);
  EXPECT_EQ(text.Value(name, {{"finished_reason", "error"}}), 0);
  EXPECT_EQ(FinishReasonName(FinishReason::kAbort), "abort");
}

TEST(EngineMetricsTest, FinishedRequestFillsThePerRequestHistograms) {
  EngineMetrics metrics(Options());
  FinishedRequestStats stats = Finished(FinishReason::kStop);
  metrics.RecordFinishedRequest(stats);
  stats.n_param = 3;
  stats.max_num_generation_tokens = 5;
  stats.max_tokens_param = 0;               // unset: not observed
  stats.mean_time_per_output_token_s = -1;  // no decode: not observed
  metrics.RecordFinishedRequest(stats);
  Exposition text(metrics.Serialize());
  for (const char* family :
       {"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds", "vllm:request_inference_time_seconds",
        "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens", "vllm:request_max_num_generation_tokens",
        "vllm:request_params_n", "vllm:request_prefill_kv_computed_tokens"}) {
    EXPECT_EQ(text.Value(std::string(family) + "_count"), 2) << family;
  }
  EXPECT_DOUBLE_EQ(text.Value("vllm:e2e_request_latency_seconds_sum"), 2.4);
  EXPECT_EQ(text.Value("vllm:request_prompt_tokens_sum"), 60);
  EXPECT_EQ(text.Value("vllm:request_prefill_kv_computed_tokens_sum"), 28);
  EXPECT_EQ(text.Value("vllm:request_max_num_generation_tokens_sum"), 17);
  EXPECT_EQ(text.BucketCount("vllm:request_params_n", "1.0"), 1);
  EXPECT_EQ(text.BucketCount("vllm:request_params_n", "5.0"), 2);
  EXPECT_EQ(text.Value("vllm:request_params_max_tokens_count"), 1);
  EXPECT_EQ(text.Value("vllm:request_time_per_output_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(text.Value("vllm:request_time_per_output_token_seconds_sum"), 0.08);
}

TEST(EngineMetricsTest, CacheConfigInfo) {
  EngineMetricsOptions options = Options();
  options.enable_prefix_caching = false;
  EngineMetrics metrics(options);
  Exposition text(metrics.Serialize());
  auto info = text.Find("vllm:cache_config_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0]->value, 1);
  const std::map<std::string, std::string> expected = {{"model_name", "tiny"},
                                                       {"engine", "3"},
                                                       {"block_size", "16"},
                                                       {"num_gpu_blocks", "512"},
                                                       {"enable_prefix_caching", "False"},
                                                       {"cache_dtype", "auto"},
                                                       {"prefix_caching_hash_algo", "sha256_cbor"}};
  EXPECT_EQ(info[0]->labels, expected);
}

// One thread records as the engine loop does while another serializes as /metrics does;
// run under TSan. The final text holds every recorded value.
TEST(EngineMetricsConcurrencyTest, RecordWhileSerializing) {
  EngineMetrics metrics(Options());
  constexpr int kSteps = 2000;
  std::atomic<bool> done{false};
  std::thread recorder([&] {
    for (int i = 0; i < kSteps; ++i) {
      metrics.SetSchedulerState(i % 7, i % 3, 0.5);
      metrics.AddPrefixCache(2, 1);
      metrics.AddPromptTokens(2, 1, 0);
      metrics.AddGenerationTokens(1);
      metrics.ObserveIterationTokens(3);
      metrics.ObserveInterTokenLatency(0.02);
      metrics.RecordFinishedRequest(Finished(FinishReason::kStop));
    }
    done.store(true);
  });
  int scrapes = 0;
  double last_generation = 0;
  while (!done.load() || scrapes == 0) {
    Exposition text(metrics.Serialize());
    const double generation = text.Value("vllm:generation_tokens_total");
    EXPECT_GE(generation, last_generation);  // counters never go back
    last_generation = generation;
    ++scrapes;
  }
  recorder.join();
  Exposition text(metrics.Serialize());
  EXPECT_EQ(text.Value("vllm:generation_tokens_total"), kSteps);
  EXPECT_EQ(text.Value("vllm:prompt_tokens_total"), 2 * kSteps);
  EXPECT_EQ(text.Value("vllm:inter_token_latency_seconds_count"), kSteps);
  EXPECT_EQ(text.Value("vllm:request_success_total", {{"finished_reason", "stop"}}), kSteps);
}

}  // namespace
}  // namespace switchyard::engine
