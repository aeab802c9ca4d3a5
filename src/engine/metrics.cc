#include "engine/metrics.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace switchyard::engine {
namespace {

using prometheus::Histogram;
using prometheus::Labels;
using prometheus::Registry;

constexpr int kNumFinishReasons = 4;

// vLLM's bucket lists (vllm/v1/metrics/loggers.py).
const Histogram::BucketBoundaries& TtftBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  return *buckets;
}

// Inter-token latency and per-request mean time per output token share this list.
const Histogram::BucketBoundaries& PerTokenBuckets() {
  static const auto* buckets =
      new Histogram::BucketBoundaries{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                      0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
  return *buckets;
}

const Histogram::BucketBoundaries& RequestLatencyBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{
      0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
      30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  return *buckets;
}

const Histogram::BucketBoundaries& IterationTokenBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{
      1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  return *buckets;
}

const Histogram::BucketBoundaries& ParamsNBuckets() {
  static const auto* buckets = new Histogram::BucketBoundaries{1, 2, 5, 10, 20};
  return *buckets;
}

// vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... while <= max_value.
Histogram::BucketBoundaries Build125Buckets(int64_t max_value) {
  Histogram::BucketBoundaries buckets;
  for (int64_t power = 1;; power *= 10) {
    for (int64_t mantissa : {1, 2, 5}) {
      if (mantissa * power > max_value) {
        return buckets;
      }
      buckets.push_back(static_cast<double>(mantissa * power));
    }
  }
}

// Python's repr(float) (shortest round trip; exponent form below 1e-4 and from 1e16),
// which prometheus_client then rewrites Go-style from 1e6 up (floatToGoString). Appended
// to `out` without allocating: a scrape formats every sample.
void AppendValue(std::string* out, double value) {
  if (std::isnan(value)) {
    *out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    *out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  if (value == 0) {
    *out += "0.0";
    return;
  }
  // Most samples are counts: a whole number below 1e6 is its digits and ".0".
  if (std::fabs(value) < 1e6 && value == std::trunc(value)) {
    absl::StrAppend(out, static_cast<int64_t>(value), ".0");
    return;
  }
  // Shortest digits as d.ddde[+-]xx; the mantissa digits and exponent are what repr uses.
  char sci[32];
  const char* const sci_end =
      std::to_chars(sci, sci + sizeof(sci), std::fabs(value), std::chars_format::scientific).ptr;
  const char* const e_pos = std::find(static_cast<const char*>(sci), sci_end, 'e');
  char digit_buf[24];
  size_t num_digits = 0;
  for (const char* c = sci; c != e_pos; ++c) {
    if (*c != '.')
      digit_buf[num_digits++] = *c;
  }
  const std::string_view digits(digit_buf, num_digits);
  int exponent = 0;
  std::from_chars(e_pos + (e_pos[1] == '+' ? 2 : 1), sci_end, exponent);
  if (value < 0)
    *out += '-';
  if (exponent < -4 || exponent >= 16) {
    *out += digits[0];
    if (digits.size() > 1) {
      *out += '.';
      *out += digits.substr(1);
    }
    *out += exponent < 0 ? "e-" : "e+";
    if (std::abs(exponent) < 10)
      *out += '0';
    absl::StrAppend(out, std::abs(exponent));
    return;
  }
  if (value > 0 && exponent >= 6) {
    // d.ddd without trailing zeros (or the point), then e+0 and the exponent.
    *out += digits[0];
    const std::string_view rest = digits.substr(1, digits.find_last_not_of('0'));
    if (!rest.empty()) {
      *out += '.';
      *out += rest;
    }
    *out += "e+0";
    absl::StrAppend(out, exponent);
    return;
  }
  if (exponent < 0) {
    *out += "0.";
    out->append(static_cast<size_t>(-exponent - 1), '0');
    *out += digits;
    return;
  }
  const auto int_len = static_cast<size_t>(exponent) + 1;
  *out += digits.substr(0, int_len);
  if (digits.size() < int_len)
    out->append(int_len - digits.size(), '0');
  *out += '.';
  *out += digits.size() > int_len ? digits.substr(int_len) : std::string_view("0");
}

void AppendEscaped(std::string* out, std::string_view text, bool escape_quotes) {
  const std::string_view special = escape_quotes ? std::string_view("\\\n\"", 3) : "\\\n";
  for (size_t pos = text.find_first_of(special); pos != std::string_view::npos;
       pos = text.find_first_of(special)) {
    out->append(text.data(), pos);
    *out += '\\';
    *out += text[pos] == '\n' ? 'n' : text[pos];
    text.remove_prefix(pos + 1);
  }
  *out += text;
}

// A metric's labels as a sample line carries them: k="v",k2="v2" (escaped), without braces.
std::string RenderLabels(const std::vector<prometheus::ClientMetric::Label>& labels) {
  std::string out;
  for (const auto& label : labels) {
    if (!out.empty()) {
      out += ',';
    }
    out += label.name;
    out += "=\"";
    AppendEscaped(&out, label.value, /*escape_quotes=*/true);
    out += '"';
  }
  return out;
}

// One sample line: name{labels[,le="x"]} value, `labels` as RenderLabels wrote them.
void AppendSample(std::string* out, std::string_view name, std::string_view labels,
                  const double* le, double value) {
  *out += name;
  if (!labels.empty() || le != nullptr) {
    *out += '{';
    *out += labels;
    if (le != nullptr) {
      if (!labels.empty()) {
        *out += ',';
      }
      *out += "le=\"";
      AppendValue(out, *le);
      *out += '"';
    }
    *out += '}';
  }
  *out += ' ';
  AppendValue(out, value);
  *out += '\n';
}

// prometheus-cpp 1.0's TextSerializer writes counters under their bare name; vLLM's
// prometheus_client (0.2x, text format 0.0.4) writes `# HELP x_total`, `# TYPE x_total
// counter` and samples named x_total, and scrapers query x_total. So the text is ours,
// written from the registry's snapshot. (No x_created series: nothing we know of reads
// them.)
std::string WriteText(const std::vector<prometheus::MetricFamily>& families) {
  std::string out;
  out.reserve(families.size() * 1024);  // about what a histogram family takes
  for (const auto& family : families) {
    const char* type = "untyped";
    switch (family.type) {
      case prometheus::MetricType::Counter:
        type = "counter";
        break;
      case prometheus::MetricType::Gauge:
        type = "gauge";
        break;
      case prometheus::MetricType::Histogram:
        type = "histogram";
        break;
      default:
        break;  // We register nothing else.
    }
    const std::string name =
        family.type == prometheus::MetricType::Counter ? family.name + "_total" : family.name;
    out += "# HELP " + name + " ";
    AppendEscaped(&out, family.help, /*escape_quotes=*/false);
    out += "\n# TYPE " + name + " " + type + "\n";
    const bool histogram = family.type == prometheus::MetricType::Histogram;
    const std::string bucket_name = histogram ? family.name + "_bucket" : "";
    const std::string count_name = histogram ? family.name + "_count" : "";
    const std::string sum_name = histogram ? family.name + "_sum" : "";
    for (const auto& metric : family.metric) {
      const std::string labels = RenderLabels(metric.label);
      switch (family.type) {
        case prometheus::MetricType::Counter:
          AppendSample(&out, name, labels, nullptr, metric.counter.value);
          break;
        case prometheus::MetricType::Gauge:
          AppendSample(&out, family.name, labels, nullptr, metric.gauge.value);
          break;
        case prometheus::MetricType::Histogram:
          for (const auto& bucket : metric.histogram.bucket) {
            AppendSample(&out, bucket_name, labels, &bucket.upper_bound,
                         static_cast<double>(bucket.cumulative_count));
          }
          AppendSample(&out, count_name, labels, nullptr,
                       static_cast<double>(metric.histogram.sample_count));
          AppendSample(&out, sum_name, labels, nullptr, metric.histogram.sample_sum);
          break;
        default:
          break;
      }
    }
  }
  return out;
}

int ReasonIndex(FinishReason reason) {
  return static_cast<int>(reason);
}

}  // namespace

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

// Every metric is created here, once, under constant names and label names, so
// prometheus-cpp's std::invalid_argument for a malformed name cannot fire (every unit test
// constructs one). The pointers stay valid for the registry's life.
struct EngineMetrics::Impl {
  explicit Impl(const EngineMetricsOptions& options);

  Labels With(const char* name, std::string value) const {
    Labels l = labels;
    l[name] = std::move(value);
    return l;
  }
  prometheus::Gauge* AddGauge(const std::string& name, const std::string& help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
  }
  prometheus::Counter* AddCounter(const std::string& name, const std::string& help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
  }
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          const Histogram::BucketBoundaries& buckets) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(labels,
                                                                                      buckets);
  }

  struct KvTierSeries {
    prometheus::Counter* store_bytes = nullptr;
    prometheus::Counter* load_bytes = nullptr;
    prometheus::Counter* store_seconds = nullptr;
    prometheus::Counter* load_seconds = nullptr;
    prometheus::Gauge* capacity_blocks = nullptr;
    prometheus::Gauge* used_blocks = nullptr;
    prometheus::Counter* queries = nullptr;
    prometheus::Counter* hits = nullptr;
    prometheus::Counter* stored_blocks = nullptr;
    prometheus::Counter* evicted_blocks = nullptr;
    prometheus::Counter* loads_done = nullptr;
    prometheus::Counter* loads_failed = nullptr;
    KvTierStats reported;
  };
  std::unique_ptr<KvTierSeries> AddKvTierSeries(const std::string& medium) {
    auto t = std::make_unique<KvTierSeries>();
    auto& bytes = prometheus::BuildCounter()
                      .Name("vllm:kv_offload_total_bytes")
                      .Help("Number of bytes offloaded by KV connector")
                      .Register(registry);
    const std::string to_tier = "GPU_to_" + medium;
    const std::string from_tier = medium + "_to_GPU";
    t->store_bytes = &bytes.Add(With("transfer_type", to_tier));
    t->load_bytes = &bytes.Add(With("transfer_type", from_tier));
    auto& time = prometheus::BuildCounter()
                     .Name("vllm:kv_offload_total_time")
                     .Help("Total time measured by all KV offloading operations")
                     .Register(registry);
    t->store_seconds = &time.Add(With("transfer_type", to_tier));
    t->load_seconds = &time.Add(With("transfer_type", from_tier));
    auto gauge = [&](const char* name, const char* help) {
      return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(
          With("medium", medium));
    };
    auto counter = [&](const char* name, const char* help) {
      return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(
          With("medium", medium));
    };
    t->capacity_blocks = gauge("switchyard:kv_tier_capacity_blocks", "KV blocks the tier holds.");
    t->used_blocks =
        gauge("switchyard:kv_tier_used_blocks", "KV blocks the tier holds or is writing now.");
    t->queries = counter("switchyard:kv_tier_queries",
                         "Prompt tokens looked up in the tier (past the pool's prefix hit).");
    t->hits = counter("switchyard:kv_tier_hits", "Prompt tokens loaded from the tier.");
    t->stored_blocks = counter("switchyard:kv_tier_stored_blocks", "KV blocks stored in the tier.");
    t->evicted_blocks =
        counter("switchyard:kv_tier_evicted_blocks", "KV blocks evicted from the tier.");
    auto& loads = prometheus::BuildCounter()
                      .Name("switchyard:kv_tier_loads")
                      .Help(
                          "Prompt prefixes loaded from the tier, by outcome (fell_back: "
                          "the prompt was computed instead).")
                      .Register(registry);
    Labels loaded = With("medium", medium);
    loaded["outcome"] = "loaded";
    Labels fell_back = With("medium", medium);
    fell_back["outcome"] = "fell_back";
    t->loads_done = &loads.Add(loaded);
    t->loads_failed = &loads.Add(fell_back);
    return t;
  }

  Registry registry;
  const Labels labels;

  prometheus::Gauge* num_requests_running;
  prometheus::Gauge* num_requests_waiting;
  prometheus::Gauge* kv_cache_usage_perc;
  prometheus::Counter* prefix_cache_queries;
  prometheus::Counter* prefix_cache_hits;
  prometheus::Counter* num_preemptions;
  prometheus::Counter* prompt_tokens;
  prometheus::Counter* prompt_tokens_local_compute;
  prometheus::Counter* prompt_tokens_local_cache_hit;
  prometheus::Counter* prompt_tokens_external_kv_transfer;
  prometheus::Counter* prompt_tokens_cached;
  prometheus::Counter* generation_tokens;
  prometheus::Counter* kv_transfer_loaded;
  prometheus::Counter* kv_transfer_fell_back;
  prometheus::Counter* kv_transfer_leases_released;
  prometheus::Counter* kv_transfer_leases_expired;
  std::array<prometheus::Counter*, 3> kv_peer_pulls{};  // by KvPeerPullOutcome
  prometheus::Counter* kv_peer_lookups_held;
  prometheus::Counter* kv_peer_lookups_none;
  prometheus::Counter* kv_peer_lent_blocks;
  // By medium.
  std::map<std::string, std::unique_ptr<KvTierSeries>> kv_tiers;
  std::array<prometheus::Counter*, kNumFinishReasons> request_success{};
  Histogram* request_prompt_tokens;
  Histogram* request_generation_tokens;
  Histogram* iteration_tokens;
  Histogram* request_max_num_generation_tokens;
  Histogram* request_params_n;
  Histogram* request_params_max_tokens;
  Histogram* time_to_first_token;
  Histogram* inter_token_latency;
  Histogram* request_time_per_output_token;
  Histogram* e2e_request_latency;
  Histogram* request_queue_time;
  Histogram* request_inference_time;
  Histogram* request_prefill_time;
  Histogram* request_decode_time;
  Histogram* request_prefill_kv_computed_tokens;
};

// prometheus-cpp collects counters, then gauges, then histograms, each in registration
// order; scrapers do not care about order.
EngineMetrics::Impl::Impl(const EngineMetricsOptions& o)
    : labels{{"model_name", o.model_name}, {"engine", o.engine_index}} {
  num_requests_running =
      AddGauge("vllm:num_requests_running", "Number of requests in model execution batches.");
  num_requests_waiting =
      AddGauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.");
  kv_cache_usage_perc =
      AddGauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
  prefix_cache_queries = AddCounter("vllm:prefix_cache_queries",
                                    "Prefix cache queries, in terms of number of queried tokens.");
  prefix_cache_hits = AddCounter("vllm:prefix_cache_hits",
                                 "Prefix cache hits, in terms of number of cached tokens.");
  num_preemptions =
      AddCounter("vllm:num_preemptions", "Cumulative number of preemption from the engine.");
  prompt_tokens = AddCounter("vllm:prompt_tokens", "Number of prefill tokens processed.");
  auto& by_source = prometheus::BuildCounter()
                        .Name("vllm:prompt_tokens_by_source")
                        .Help("Number of prompt tokens by source.")
                        .Register(registry);
  prompt_tokens_local_compute = &by_source.Add(With("source", "local_compute"));
  prompt_tokens_local_cache_hit = &by_source.Add(With("source", "local_cache_hit"));
  prompt_tokens_external_kv_transfer = &by_source.Add(With("source", "external_kv_transfer"));
  prompt_tokens_cached =
      AddCounter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).");
  generation_tokens =
      AddCounter("vllm:generation_tokens", "Number of generation tokens processed.");
  auto& loads = prometheus::BuildCounter()
                    .Name("switchyard:kv_transfer_loads")
                    .Help(
                        "Remote prefills pulled by this engine, by outcome (fell_back: the "
                        "prompt was computed here instead).")
                    .Register(registry);
  kv_transfer_loaded = &loads.Add(With("outcome", "loaded"));
  kv_transfer_fell_back = &loads.Add(With("outcome", "fell_back"));
  auto& leases = prometheus::BuildCounter()
                     .Name("switchyard:kv_transfer_leases_ended")
                     .Help("KV leases this engine held for remote decodes, by how they ended.")
                     .Register(registry);
  kv_transfer_leases_released = &leases.Add(With("how", "released"));
  kv_transfer_leases_expired = &leases.Add(With("how", "expired"));
  auto& pulls = prometheus::BuildCounter()
                    .Name("switchyard:kv_peer_pulls")
                    .Help(
                        "Prefix pulls from the engine the router named as holding the prompt, by "
                        "outcome (missed: it held none; fell_back: the pull failed).")
                    .Register(registry);
  kv_peer_pulls[static_cast<size_t>(KvPeerPullOutcome::kLoaded)] =
      &pulls.Add(With("outcome", "loaded"));
  kv_peer_pulls[static_cast<size_t>(KvPeerPullOutcome::kMissed)] =
      &pulls.Add(With("outcome", "missed"));
  kv_peer_pulls[static_cast<size_t>(KvPeerPullOutcome::kFellBack)] =
      &pulls.Add(With("outcome", "fell_back"));
  auto& lookups = prometheus::BuildCounter()
                      .Name("switchyard:kv_peer_lookups")
                      .Help("Peers' prefix lookups answered, by whether any block was lent.")
                      .Register(registry);
  kv_peer_lookups_held = &lookups.Add(With("outcome", "held"));
  kv_peer_lookups_none = &lookups.Add(With("outcome", "none"));
  kv_peer_lent_blocks =
      AddCounter("switchyard:kv_peer_lent_blocks", "KV blocks lent to peers' prefix lookups.");
  for (const std::string& medium : o.kv_tier_media)
    kv_tiers.emplace(medium, AddKvTierSeries(medium));
  auto& success = prometheus::BuildCounter()
                      .Name("vllm:request_success")
                      .Help("Count of successfully processed requests.")
                      .Register(registry);
  for (int i = 0; i < kNumFinishReasons; ++i) {
    request_success[i] = &success.Add(
        With("finished_reason", std::string(FinishReasonName(static_cast<FinishReason>(i)))));
  }

  const Histogram::BucketBoundaries token_buckets = Build125Buckets(o.max_model_len);
  request_prompt_tokens = AddHistogram("vllm:request_prompt_tokens",
                                       "Number of prefill tokens processed.", token_buckets);
  request_generation_tokens = AddHistogram("vllm:request_generation_tokens",
                                           "Number of generation tokens processed.", token_buckets);
  iteration_tokens =
      AddHistogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                   IterationTokenBuckets());
  request_max_num_generation_tokens =
      AddHistogram("vllm:request_max_num_generation_tokens",
                   "Histogram of maximum number of requested generation tokens.", token_buckets);
  request_params_n = AddHistogram("vllm:request_params_n", "Histogram of the n request parameter.",
                                  ParamsNBuckets());
  request_params_max_tokens =
      AddHistogram("vllm:request_params_max_tokens",
                   "Histogram of the max_tokens request parameter.", token_buckets);
  time_to_first_token = AddHistogram("vllm:time_to_first_token_seconds",
                                     "Histogram of time to first token in seconds.", TtftBuckets());
  inter_token_latency =
      AddHistogram("vllm:inter_token_latency_seconds",
                   "Histogram of inter-token latency in seconds.", PerTokenBuckets());
  request_time_per_output_token =
      AddHistogram("vllm:request_time_per_output_token_seconds",
                   "Histogram of time_per_output_token_seconds per request.", PerTokenBuckets());
  e2e_request_latency =
      AddHistogram("vllm:e2e_request_latency_seconds",
                   "Histogram of e2e request latency in seconds.", RequestLatencyBuckets());
  request_queue_time = AddHistogram("vllm:request_queue_time_seconds",
                                    "Histogram of time spent in WAITING phase for request.",
                                    RequestLatencyBuckets());
  request_inference_time = AddHistogram("vllm:request_inference_time_seconds",
                                        "Histogram of time spent in RUNNING phase for request.",
                                        RequestLatencyBuckets());
  request_prefill_time = AddHistogram("vllm:request_prefill_time_seconds",
                                      "Histogram of time spent in PREFILL phase for request.",
                                      RequestLatencyBuckets());
  request_decode_time =
      AddHistogram("vllm:request_decode_time_seconds",
                   "Histogram of time spent in DECODE phase for request.", RequestLatencyBuckets());
  request_prefill_kv_computed_tokens =
      AddHistogram("vllm:request_prefill_kv_computed_tokens",
                   "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
                   token_buckets);

  // An info metric: a gauge fixed at 1 whose labels carry the values, as Python's str()
  // writes them.
  Labels info = labels;
  info["block_size"] = std::to_string(o.block_size);
  info["num_gpu_blocks"] = std::to_string(o.num_gpu_blocks);
  info["enable_prefix_caching"] = o.enable_prefix_caching ? "True" : "False";
  info["cache_dtype"] = o.cache_dtype;
  info["prefix_caching_hash_algo"] = o.prefix_caching_hash_algo;
  prometheus::BuildGauge()
      .Name("vllm:cache_config_info")
      .Help("Information of the LLMEngine CacheConfig")
      .Register(registry)
      .Add(info)
      .Set(1);
}

EngineMetrics::EngineMetrics(const EngineMetricsOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

void EngineMetrics::SetStartup(const StartupNumbers& n) {
  Impl& m = *impl_;
  m.AddGauge("switchyard:startup_weights_seconds", "Seconds the weights took to load.")
      ->Set(n.weights_seconds);
  auto& bytes = prometheus::BuildGauge()
                    .Name("switchyard:startup_weights_bytes")
                    .Help(
                        "Weight bytes by how they were loaded: mapped from the file (shared), "
                        "copied, or converted to another dtype; packed: copies laid out for "
                        "MatMul, on top of those.")
                    .Register(m.registry);
  bytes.Add(m.With("loaded", "mapped")).Set(static_cast<double>(n.weights_mapped_bytes));
  bytes.Add(m.With("loaded", "copied")).Set(static_cast<double>(n.weights_copied_bytes));
  bytes.Add(m.With("loaded", "converted")).Set(static_cast<double>(n.weights_converted_bytes));
  bytes.Add(m.With("loaded", "packed")).Set(static_cast<double>(n.weights_packed_bytes));
  m.AddGauge("switchyard:startup_compile_seconds",
             "Seconds the compiled step buckets took to be ready.")
      ->Set(n.compile_seconds);
  auto& buckets = prometheus::BuildGauge()
                      .Name("switchyard:startup_compiled_buckets")
                      .Help("Compiled step buckets by where each came from.")
                      .Register(m.registry);
  for (const auto& [source, count] : n.compiled_buckets)
    buckets.Add(m.With("source", source)).Set(static_cast<double>(count));
}

EngineMetrics::~EngineMetrics() = default;

void EngineMetrics::SetSchedulerState(int64_t num_running, int64_t num_waiting,
                                      double kv_cache_usage) {
  impl_->num_requests_running->Set(static_cast<double>(num_running));
  impl_->num_requests_waiting->Set(static_cast<double>(num_waiting));
  impl_->kv_cache_usage_perc->Set(kv_cache_usage);
}

void EngineMetrics::AddPrefixCache(int64_t queries, int64_t hits) {
  impl_->prefix_cache_queries->Increment(static_cast<double>(queries));
  impl_->prefix_cache_hits->Increment(static_cast<double>(hits));
}

void EngineMetrics::AddPreemptions(int64_t count) {
  impl_->num_preemptions->Increment(static_cast<double>(count));
}

void EngineMetrics::AddPromptTokens(int64_t prompt_tokens, int64_t cached_tokens,
                                    int64_t external_tokens) {
  cached_tokens = std::max<int64_t>(0, std::min(cached_tokens, prompt_tokens));
  external_tokens = std::max<int64_t>(0, std::min(external_tokens, cached_tokens));
  impl_->prompt_tokens->Increment(static_cast<double>(prompt_tokens));
  impl_->prompt_tokens_cached->Increment(static_cast<double>(cached_tokens));
  impl_->prompt_tokens_local_cache_hit->Increment(
      static_cast<double>(cached_tokens - external_tokens));
  impl_->prompt_tokens_external_kv_transfer->Increment(static_cast<double>(external_tokens));
  impl_->prompt_tokens_local_compute->Increment(static_cast<double>(prompt_tokens - cached_tokens));
}

void EngineMetrics::AddKvTransferLoad(bool loaded) {
  (loaded ? impl_->kv_transfer_loaded : impl_->kv_transfer_fell_back)->Increment();
}

void EngineMetrics::AddKvTransferLeaseEnded(bool expired) {
  (expired ? impl_->kv_transfer_leases_expired : impl_->kv_transfer_leases_released)->Increment();
}

void EngineMetrics::AddKvPeerPull(KvPeerPullOutcome outcome) {
  impl_->kv_peer_pulls[static_cast<size_t>(outcome)]->Increment();
}

void EngineMetrics::AddKvPeerLookup(int64_t lent_blocks) {
  (lent_blocks > 0 ? impl_->kv_peer_lookups_held : impl_->kv_peer_lookups_none)->Increment();
  impl_->kv_peer_lent_blocks->Increment(static_cast<double>(lent_blocks));
}

void EngineMetrics::SetKvTier(const KvTierStats& stats) {
  Impl::KvTierSeries& t = *impl_->kv_tiers.at(stats.medium);
  const KvTierStats& last = t.reported;
  auto add = [](prometheus::Counter* counter, double delta) {
    if (delta > 0)
      counter->Increment(delta);
  };
  add(t.store_bytes, static_cast<double>(stats.store_bytes - last.store_bytes));
  add(t.load_bytes, static_cast<double>(stats.load_bytes - last.load_bytes));
  add(t.store_seconds, stats.store_seconds - last.store_seconds);
  add(t.load_seconds, stats.load_seconds - last.load_seconds);
  add(t.queries, static_cast<double>(stats.query_tokens - last.query_tokens));
  add(t.hits, static_cast<double>(stats.hit_tokens - last.hit_tokens));
  add(t.stored_blocks, static_cast<double>(stats.stored_blocks - last.stored_blocks));
  add(t.evicted_blocks, static_cast<double>(stats.evicted_blocks - last.evicted_blocks));
  add(t.loads_done, static_cast<double>(stats.loads_done - last.loads_done));
  add(t.loads_failed, static_cast<double>(stats.loads_failed - last.loads_failed));
  t.capacity_blocks->Set(static_cast<double>(stats.capacity_blocks));
  t.used_blocks->Set(static_cast<double>(stats.used_blocks));
  t.reported = stats;
}

void EngineMetrics::AddGenerationTokens(int64_t count) {
  impl_->generation_tokens->Increment(static_cast<double>(count));
}

void EngineMetrics::ObserveIterationTokens(int64_t count) {
  impl_->iteration_tokens->Observe(static_cast<double>(count));
}

void EngineMetrics::ObserveTimeToFirstToken(double seconds) {
  impl_->time_to_first_token->Observe(seconds);
}

void EngineMetrics::ObserveInterTokenLatency(double seconds) {
  impl_->inter_token_latency->Observe(seconds);
}

void EngineMetrics::RecordFinishedRequest(const FinishedRequestStats& stats) {
  Impl& m = *impl_;
  m.request_success[ReasonIndex(stats.finish_reason)]->Increment();
  m.e2e_request_latency->Observe(stats.e2e_latency_s);
  m.request_queue_time->Observe(stats.queued_time_s);
  m.request_prefill_time->Observe(stats.prefill_time_s);
  m.request_inference_time->Observe(stats.inference_time_s);
  m.request_decode_time->Observe(stats.decode_time_s);
  m.request_prefill_kv_computed_tokens->Observe(
      static_cast<double>(stats.num_prompt_tokens - std::max<int64_t>(stats.num_cached_tokens, 0)));
  m.request_prompt_tokens->Observe(static_cast<double>(stats.num_prompt_tokens));
  m.request_generation_tokens->Observe(static_cast<double>(stats.num_generation_tokens));
  m.request_max_num_generation_tokens->Observe(
      static_cast<double>(stats.max_num_generation_tokens >= 0 ? stats.max_num_generation_tokens
                                                               : stats.num_generation_tokens));
  m.request_params_n->Observe(static_cast<double>(stats.n_param));
  if (stats.mean_time_per_output_token_s >= 0) {
    m.request_time_per_output_token->Observe(stats.mean_time_per_output_token_s);
  }
  // vLLM skips a zero max_tokens (unset).
  if (stats.max_tokens_param != 0) {
    m.request_params_max_tokens->Observe(static_cast<double>(stats.max_tokens_param));
  }
}

std::string EngineMetrics::Serialize() const {
  return WriteText(impl_->registry.Collect());
}

}  // namespace switchyard::engine
