#include "router/scheduling/picker_config.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include "absl/time/time.h"
#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

#include "base/config.h"
#include "base/random_bytes.h"
#include "base/status_macros.h"
#include "router/flow/concurrency_detector.h"
#include "router/flow/flow_policies.h"
#include "router/flow/utilization_detector.h"
#include "router/scheduling/label_filters.h"
#include "router/scheduling/load_scorers.h"
#include "router/scheduling/pickers.h"
#include "router/scheduling/prefix_plugins.h"

namespace switchyard::router {
namespace {

// A disagg-profile-handler's parameters, resolved once every profile is built.
struct DisaggSpec {
  std::string decode_profile;
  std::string prefill_profile;
  std::string decider_ref;
};

struct Built {
  std::unique_ptr<Filter> filter;
  std::unique_ptr<Scorer> scorer;
  std::unique_ptr<Picker> picker;
  PreRequest* pre_request = nullptr;
  std::unique_ptr<PdDecider> decider = nullptr;
  std::optional<DisaggSpec> disagg = std::nullopt;
  std::unique_ptr<P2pSourceProducer> p2p_source = nullptr;
  const flow::SaturationDetector* detector = nullptr;  // points into `filter`
};

// State the plugins of one PluginSet share, created on first use.
struct Shared {
  std::unique_ptr<PrefixIndex>* approx_index;
  std::unique_ptr<PrefixIndex>* precise_index;
  // The smallest blockSizeTokens of the plugins on each index (0: none yet).
  int32_t* approx_block_size;
  int32_t* precise_block_size;
  const SessionTokenCodec* session_codec;
  bool* issues_session_tokens;  // set by a session-affinity plugin of the token strategy
  const ObserverSlot* observers;
  std::vector<SessionAffinity*>* session_plugins;  // of the session_id strategy
};

absl::StatusOr<Built> MakeSessionAffinity(const YAML::Node& p, const std::string& where,
                                          Shared shared, bool filter) {
  SY_ASSIGN_OR_RETURN(std::string strategy,
                      base::YamlField<std::string>(p, "strategy", "encoded_endpoint_header"));
  SY_ASSIGN_OR_RETURN(int64_t ttl, base::YamlField<int64_t>(p, "evictionTtlSeconds", 300));
  if (strategy != "encoded_endpoint_header" && strategy != "session_id") {
    return absl::InvalidArgumentError(fmt::format(
        "{}: strategy must be encoded_endpoint_header or session_id, got '{}'", where, strategy));
  }
  if (ttl <= 0)
    return absl::InvalidArgumentError(fmt::format("{}: evictionTtlSeconds must be > 0", where));
  if (strategy != "session_id")
    *shared.issues_session_tokens = true;
  auto plugin = std::make_unique<SessionAffinity>(
      strategy == "session_id" ? SessionAffinity::Strategy::kSessionId
                               : SessionAffinity::Strategy::kToken,
      shared.session_codec, std::chrono::seconds(ttl), shared.observers);
  if (strategy == "session_id")
    shared.session_plugins->push_back(plugin.get());
  PreRequest* pre = plugin.get();
  if (filter)
    return Built{std::move(plugin), nullptr, nullptr, pre};
  return Built{nullptr, std::move(plugin), nullptr, pre};
}

using Factory = std::function<absl::StatusOr<Built>(const YAML::Node& params,
                                                    const std::string& where, Shared shared)>;

absl::StatusOr<int> MaxEndpoints(const YAML::Node& params, const std::string& where) {
  SY_ASSIGN_OR_RETURN(int n, base::YamlField<int>(params, "maxNumOfEndpoints", 1));
  if (n < 1)
    return absl::InvalidArgumentError(fmt::format("{}: maxNumOfEndpoints must be >= 1", where));
  return n;
}

absl::StatusOr<LabelSelector> ParseSelector(const YAML::Node& params, const std::string& where) {
  LabelSelector selector;
  const YAML::Node labels = params["matchLabels"];
  if (labels && !labels.IsMap())
    return absl::InvalidArgumentError(fmt::format("{}: matchLabels must be a map", where));
  if (labels) {
    for (const auto& kv : labels)
      selector.match_labels[kv.first.Scalar()] = kv.second.Scalar();
  }
  const YAML::Node exprs = params["matchExpressions"];
  if (exprs && !exprs.IsSequence())
    return absl::InvalidArgumentError(fmt::format("{}: matchExpressions must be a list", where));
  if (exprs) {
    for (const YAML::Node& e : exprs) {
      LabelExpression expr;
      SY_ASSIGN_OR_RETURN(expr.key, base::YamlField<std::string>(e, "key", ""));
      SY_ASSIGN_OR_RETURN(std::string op, base::YamlField<std::string>(e, "operator", ""));
      if (op == "In") {
        expr.op = LabelExpression::Op::kIn;
      } else if (op == "NotIn") {
        expr.op = LabelExpression::Op::kNotIn;
      } else if (op == "Exists") {
        expr.op = LabelExpression::Op::kExists;
      } else if (op == "DoesNotExist") {
        expr.op = LabelExpression::Op::kDoesNotExist;
      } else {
        return absl::InvalidArgumentError(fmt::format(
            "{}: operator must be In, NotIn, Exists or DoesNotExist, got '{}'", where, op));
      }
      if (expr.key.empty())
        return absl::InvalidArgumentError(fmt::format("{}: a matchExpression needs a key", where));
      if (const YAML::Node values = e["values"]; values && values.IsSequence()) {
        for (const YAML::Node& v : values)
          expr.values.insert(v.Scalar());
      }
      selector.match_expressions.push_back(std::move(expr));
    }
  }
  return selector;
}

// mediumWeights: {GPU: w, CPU: w, DISK: w}, each in [0, 1]; the ones left out keep their
// defaults.
absl::StatusOr<KvTierWeights> MediumWeights(const YAML::Node& p, const std::string& where) {
  KvTierWeights weights = kDefaultKvTierWeights;
  const YAML::Node node = p["mediumWeights"];
  if (!node)
    return weights;
  if (!node.IsMap())
    return absl::InvalidArgumentError(fmt::format("{}: mediumWeights must be a map", where));
  for (const auto& entry : node) {
    const std::string medium = entry.first.Scalar();
    const std::optional<KvTier> tier = KvTierOfMedium(medium);
    double weight = -1;
    if (!tier.has_value() || !YAML::convert<double>::decode(entry.second, weight) ||
        !(weight >= 0 && weight <= 1)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: mediumWeights takes GPU, CPU and DISK, each a weight in [0, 1]; got '{}'", where,
          medium));
    }
    weights[static_cast<size_t>(*tier)] = weight;
  }
  return weights;
}

// The parameters every prefix plugin shares, and its index (one per mode per PluginSet).
absl::StatusOr<PrefixMatcher> MakePrefixMatcher(const YAML::Node& p, const std::string& where,
                                                Shared shared) {
  PrefixMatchOptions o;
  SY_ASSIGN_OR_RETURN(std::string mode, base::YamlField<std::string>(p, "mode", "approximate"));
  if (mode != "approximate" && mode != "precise") {
    return absl::InvalidArgumentError(
        fmt::format("{}: mode must be approximate or precise, got '{}'", where, mode));
  }
  o.precise = mode == "precise";
  SY_ASSIGN_OR_RETURN(o.block_size, base::YamlField<int32_t>(p, "blockSizeTokens", 16));
  SY_ASSIGN_OR_RETURN(int64_t max_blocks,
                      base::YamlField<int64_t>(p, "maxPrefixBlocksToMatch", 8192));
  SY_ASSIGN_OR_RETURN(int64_t capacity, base::YamlField<int64_t>(p, "lruCapacityPerServer", 31250));
  if (o.block_size <= 0 || max_blocks <= 0 || capacity <= 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: blockSizeTokens, maxPrefixBlocksToMatch and lruCapacityPerServer must be positive",
        where));
  }
  o.max_blocks = static_cast<size_t>(max_blocks);
  SY_ASSIGN_OR_RETURN(o.tier_weights, MediumWeights(p, where));
  std::unique_ptr<PrefixIndex>& index = o.precise ? *shared.precise_index : *shared.approx_index;
  if (index == nullptr)
    index = std::make_unique<PrefixIndex>(static_cast<size_t>(capacity));
  int32_t& index_block_size = o.precise ? *shared.precise_block_size : *shared.approx_block_size;
  index_block_size =
      index_block_size == 0 ? o.block_size : std::min(index_block_size, o.block_size);
  return PrefixMatcher(index.get(), o, shared.observers);
}

absl::StatusOr<Built> MakePrefixScorer(const YAML::Node& p, const std::string& where,
                                       Shared shared) {
  SY_ASSIGN_OR_RETURN(PrefixMatcher matcher, MakePrefixMatcher(p, where, shared));
  PrefixScorerOptions o;
  SY_ASSIGN_OR_RETURN(o.match_length_weight, base::YamlField<double>(p, "matchLengthWeight", 0));
  SY_ASSIGN_OR_RETURN(o.match_length_scale_tokens,
                      base::YamlField<double>(p, "matchLengthScaleTokens", 8192));
  if (o.match_length_weight < 0 || o.match_length_weight > 1 ||
      !(o.match_length_scale_tokens > 0)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: matchLengthWeight must be in [0, 1] and matchLengthScaleTokens positive", where));
  }
  auto scorer = std::make_unique<PrefixCacheScorer>(std::move(matcher), o);
  PreRequest* pre = scorer.get();
  return Built{nullptr, std::move(scorer), nullptr, pre};
}

absl::StatusOr<Built> MakePrefixAffinityFilter(const YAML::Node& p, const std::string& where,
                                               Shared shared) {
  SY_ASSIGN_OR_RETURN(PrefixMatcher matcher, MakePrefixMatcher(p, where, shared));
  PrefixAffinityOptions o;
  SY_ASSIGN_OR_RETURN(o.affinity_threshold, base::YamlField<double>(p, "affinityThreshold", 0.80));
  SY_ASSIGN_OR_RETURN(o.exploration_probability,
                      base::YamlField<double>(p, "explorationProbability", 0));
  SY_ASSIGN_OR_RETURN(o.max_ttft_penalty_ms,
                      base::YamlField<double>(p, "maxTTFTPenaltyMs", 18'000));
  SY_ASSIGN_OR_RETURN(o.peak_prefill_tokens_per_s,
                      base::YamlField<double>(p, "peakPrefillThroughput", 15'928));
  if (!(o.affinity_threshold >= 0 && o.affinity_threshold <= 1) ||
      !(o.exploration_probability >= 0 && o.exploration_probability <= 1) ||
      !(o.max_ttft_penalty_ms >= 0) || !(o.peak_prefill_tokens_per_s > 0)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: affinityThreshold and explorationProbability must be in [0, 1], "
                    "maxTTFTPenaltyMs >= 0, peakPrefillThroughput > 0",
                    where));
  }
  return Built{
      std::make_unique<PrefixCacheAffinityFilter>(std::move(matcher), o, std::random_device{}()),
      nullptr, nullptr, nullptr};
}

absl::StatusOr<Built> MakeNoHitLruScorer(const YAML::Node& p, const std::string& where,
                                         Shared shared) {
  SY_ASSIGN_OR_RETURN(PrefixMatcher matcher, MakePrefixMatcher(p, where, shared));
  SY_ASSIGN_OR_RETURN(int64_t lru_size, base::YamlField<int64_t>(p, "lruSize", 1024));
  if (lru_size <= 0)
    return absl::InvalidArgumentError(fmt::format("{}: lruSize must be positive", where));
  auto scorer = std::make_unique<NoHitLruScorer>(std::move(matcher), static_cast<size_t>(lru_size));
  PreRequest* pre = scorer.get();
  return Built{nullptr, std::move(scorer), nullptr, pre};
}

absl::StatusOr<Built> MakePrefixBasedPdDecider(const YAML::Node& p, const std::string& where,
                                               Shared) {
  SY_ASSIGN_OR_RETURN(int64_t non_cached, base::YamlField<int64_t>(p, "nonCachedTokens", 0));
  SY_ASSIGN_OR_RETURN(int64_t prompt, base::YamlField<int64_t>(p, "promptTokens", 0));
  if (non_cached < 0 || prompt < 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: nonCachedTokens and promptTokens must be >= 0", where));
  }
  Built built;
  built.decider = std::make_unique<PrefixBasedPdDecider>(non_cached, prompt);
  return built;
}

absl::StatusOr<Built> MakeP2pSourceProducer(const YAML::Node& p, const std::string& where, Shared) {
  SY_ASSIGN_OR_RETURN(int64_t min_extra, base::YamlField<int64_t>(p, "minExtraTokens", 256));
  if (min_extra < 1)
    return absl::InvalidArgumentError(fmt::format("{}: minExtraTokens must be >= 1", where));
  std::optional<uint16_t> kv_port;
  if (p["kvPort"]) {
    SY_ASSIGN_OR_RETURN(int64_t port, base::YamlField<int64_t>(p, "kvPort", 0));
    if (port < 1 || port > 65535)
      return absl::InvalidArgumentError(fmt::format("{}: kvPort must be in 1..65535", where));
    kv_port = static_cast<uint16_t>(port);
  }
  Built built;
  built.p2p_source = std::make_unique<P2pSourceProducer>(min_extra, kv_port);
  return built;
}

// A saturation detector, which also filters when a profile references it.
template <typename Detector>
Built DetectorPlugin(std::unique_ptr<Detector> detector) {
  Built built;
  built.detector = detector.get();
  built.filter = std::move(detector);
  return built;
}

absl::StatusOr<Built> MakeUtilizationDetector(const YAML::Node& p, const std::string& where,
                                              Shared) {
  flow::UtilizationDetectorOptions o;
  SY_ASSIGN_OR_RETURN(o.queue_depth_threshold,
                      base::YamlField<int64_t>(p, "queueDepthThreshold", o.queue_depth_threshold));
  SY_ASSIGN_OR_RETURN(
      o.kv_cache_util_threshold,
      base::YamlField<double>(p, "kvCacheUtilThreshold", o.kv_cache_util_threshold));
  SY_ASSIGN_OR_RETURN(std::string staleness,
                      base::YamlField<std::string>(p, "metricsStalenessThreshold", "200ms"));
  SY_ASSIGN_OR_RETURN(o.headroom, base::YamlField<double>(p, "headroom", o.headroom));
  absl::Duration duration;
  if (!absl::ParseDuration(staleness, &duration) || duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: metricsStalenessThreshold must be a positive duration such as \"200ms\", got '{}'",
        where, staleness));
  }
  o.metrics_staleness_threshold = absl::ToChronoNanoseconds(duration);
  if (o.queue_depth_threshold <= 0 ||
      !(o.kv_cache_util_threshold > 0 && o.kv_cache_util_threshold <= 1) || !(o.headroom >= 0)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: queueDepthThreshold must be > 0, kvCacheUtilThreshold in (0, 1], "
                    "headroom >= 0",
                    where));
  }
  return DetectorPlugin(std::make_unique<flow::UtilizationDetector>(o));
}

absl::StatusOr<Built> MakeConcurrencyDetector(const YAML::Node& p, const std::string& where,
                                              Shared) {
  using Mode = flow::ConcurrencyDetectorOptions::Mode;
  flow::ConcurrencyDetectorOptions o;
  SY_ASSIGN_OR_RETURN(std::string mode,
                      base::YamlField<std::string>(p, "concurrencyMode", "requests"));
  SY_ASSIGN_OR_RETURN(o.max_concurrency,
                      base::YamlField<int64_t>(p, "maxConcurrency", o.max_concurrency));
  SY_ASSIGN_OR_RETURN(o.max_token_concurrency,
                      base::YamlField<int64_t>(p, "maxTokenConcurrency", o.max_token_concurrency));
  SY_ASSIGN_OR_RETURN(o.headroom, base::YamlField<double>(p, "headroom", o.headroom));
  if (mode == "requests") {
    o.mode = Mode::kRequests;
  } else if (mode == "tokens") {
    o.mode = Mode::kTokens;
  } else if (mode == "hybrid") {
    o.mode = Mode::kHybrid;
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "{}: concurrencyMode must be requests, tokens or hybrid, got '{}'", where, mode));
  }
  if (o.max_concurrency <= 0 || o.max_token_concurrency <= 0 || !(o.headroom >= 0)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: maxConcurrency and maxTokenConcurrency must be > 0, headroom >= 0", where));
  }
  return DetectorPlugin(std::make_unique<flow::ConcurrencyDetector>(o));
}

absl::StatusOr<Built> MakeDisaggProfileHandler(const YAML::Node& p, const std::string& where,
                                               Shared) {
  DisaggSpec spec;
  const YAML::Node profiles = p["profiles"] ? p["profiles"] : YAML::Node(YAML::NodeType::Map);
  const YAML::Node deciders = p["deciders"] ? p["deciders"] : YAML::Node(YAML::NodeType::Map);
  if (!profiles.IsMap() || !deciders.IsMap())
    return absl::InvalidArgumentError(fmt::format("{}: profiles and deciders must be maps", where));
  SY_ASSIGN_OR_RETURN(spec.decode_profile,
                      base::YamlField<std::string>(profiles, "decode", "decode"));
  SY_ASSIGN_OR_RETURN(spec.prefill_profile,
                      base::YamlField<std::string>(profiles, "prefill", "prefill"));
  SY_ASSIGN_OR_RETURN(spec.decider_ref, base::YamlField<std::string>(deciders, "prefill", ""));
  if (spec.decider_ref.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: deciders.prefill must name a pd decider plugin", where));
  }
  Built built;
  built.disagg = std::move(spec);
  return built;
}

const std::map<std::string, Factory>& Registry() {
  static const auto* registry = new std::map<std::string, Factory>{
      {"queue-scorer",
       [](const YAML::Node&, const std::string&, Shared) -> absl::StatusOr<Built> {
         return Built{nullptr, std::make_unique<QueueScorer>(), nullptr};
       }},
      {"kv-cache-utilization-scorer",
       [](const YAML::Node&, const std::string&, Shared) -> absl::StatusOr<Built> {
         return Built{nullptr, std::make_unique<KvCacheUtilizationScorer>(), nullptr};
       }},
      {"running-requests-size-scorer",
       [](const YAML::Node&, const std::string&, Shared) -> absl::StatusOr<Built> {
         return Built{nullptr, std::make_unique<RunningRequestsSizeScorer>(), nullptr};
       }},
      {"active-request-scorer",
       [](const YAML::Node& p, const std::string&, Shared) -> absl::StatusOr<Built> {
         SY_ASSIGN_OR_RETURN(int64_t idle, base::YamlField<int64_t>(p, "idleThreshold", 0));
         SY_ASSIGN_OR_RETURN(double busy, base::YamlField<double>(p, "maxBusyScore", 1.0));
         return Built{nullptr, std::make_unique<ActiveRequestScorer>(idle, busy), nullptr};
       }},
      {"max-score-picker",
       [](const YAML::Node& p, const std::string& where, Shared) -> absl::StatusOr<Built> {
         SY_ASSIGN_OR_RETURN(int n, MaxEndpoints(p, where));
         return Built{nullptr, nullptr, std::make_unique<MaxScorePicker>(n)};
       }},
      {"random-picker",
       [](const YAML::Node& p, const std::string& where, Shared) -> absl::StatusOr<Built> {
         SY_ASSIGN_OR_RETURN(int n, MaxEndpoints(p, where));
         return Built{nullptr, nullptr, std::make_unique<RandomPicker>(n)};
       }},
      {"weighted-random-picker",
       [](const YAML::Node& p, const std::string& where, Shared) -> absl::StatusOr<Built> {
         SY_ASSIGN_OR_RETURN(int n, MaxEndpoints(p, where));
         return Built{nullptr, nullptr, std::make_unique<WeightedRandomPicker>(n)};
       }},
      // Ours, not an llm-d type: a score-blind baseline (benchmarks compare against it).
      {"round-robin-picker",
       [](const YAML::Node& p, const std::string& where, Shared) -> absl::StatusOr<Built> {
         SY_ASSIGN_OR_RETURN(int n, MaxEndpoints(p, where));
         return Built{nullptr, nullptr, std::make_unique<RoundRobinPicker>(n)};
       }},
      {"label-selector-filter",
       [](const YAML::Node& p, const std::string& where, Shared) -> absl::StatusOr<Built> {
         SY_ASSIGN_OR_RETURN(LabelSelector selector, ParseSelector(p, where));
         return Built{std::make_unique<LabelSelectorFilter>(std::move(selector)), nullptr, nullptr};
       }},
      {"prefix-cache-scorer", &MakePrefixScorer},
      {"prefix-cache-affinity-filter", &MakePrefixAffinityFilter},
      {"no-hit-lru-scorer", &MakeNoHitLruScorer},
      {"session-affinity-scorer",
       [](const YAML::Node& p, const std::string& where, Shared shared) {
         return MakeSessionAffinity(p, where, shared, false);
       }},
      {"session-affinity-filter",
       [](const YAML::Node& p, const std::string& where, Shared shared) {
         return MakeSessionAffinity(p, where, shared, true);
       }},
      {"decode-filter",
       [](const YAML::Node&, const std::string&, Shared) -> absl::StatusOr<Built> {
         return Built{std::make_unique<RoleFilter>(RoleFilter::Decode()), nullptr, nullptr};
       }},
      {"prefill-filter",
       [](const YAML::Node&, const std::string&, Shared) -> absl::StatusOr<Built> {
         return Built{std::make_unique<RoleFilter>(RoleFilter::Prefill()), nullptr, nullptr};
       }},
      {"prefix-based-pd-decider", &MakePrefixBasedPdDecider},
      {"always-disagg-pd-decider",
       [](const YAML::Node&, const std::string&, Shared) -> absl::StatusOr<Built> {
         Built built;
         built.decider = std::make_unique<AlwaysDisaggPdDecider>();
         return built;
       }},
      {"disagg-profile-handler", &MakeDisaggProfileHandler},
      {"p2p-source-producer", &MakeP2pSourceProducer},
      {"utilization-detector", &MakeUtilizationDetector},
      {"concurrency-detector", &MakeConcurrencyDetector},
  };
  return *registry;
}

}  // namespace

void PluginSet::SetEndpointKvCache(const std::string& endpoint, int64_t num_blocks,
                                   int32_t block_size) const {
  const bool known = num_blocks > 0 && block_size > 0;
  // In tokens, saturating: the numbers come from the engine.
  const int64_t tokens = !known ? 0
                         : num_blocks > std::numeric_limits<int64_t>::max() / block_size
                             ? std::numeric_limits<int64_t>::max()
                             : num_blocks * block_size;
  for (const auto& [index, index_block_size] :
       {std::pair{approx_index_.get(), approx_block_size_},
        std::pair{precise_index_.get(), precise_block_size_}}) {
    if (index == nullptr)
      continue;
    // At least one block, so that a tiny cache does not read as "unknown" (0).
    const size_t capacity =
        known ? static_cast<size_t>(std::max<int64_t>(1, tokens / index_block_size)) : 0;
    index->SetCapacity(endpoint, capacity);
  }
}

void PluginSet::LearnPrefix(const std::string& endpoint, std::span<const uint64_t> keys) const {
  if (approx_index_ != nullptr)
    approx_index_->Add(endpoint, keys);
}

void PluginSet::BindSession(std::string_view session_id, const std::string& endpoint) const {
  for (SessionAffinity* plugin : session_plugins_)
    plugin->Bind(session_id, endpoint);
}

const flow::SaturationDetector* PluginSet::saturation_detector(const std::string& ref) const {
  auto it = plugins_.find(ref);
  return it == plugins_.end() ? nullptr : it->second.detector;
}

const SchedulingProfile* PluginSet::profile(const std::string& name) const {
  for (const auto& p : profiles_) {
    if (p->name() == name)
      return p.get();
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<PluginSet>> PluginSet::FromYaml(std::string_view yaml,
                                                               std::string_view source,
                                                               const PluginSetOptions& options) {
  SY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(yaml, source));
  // yaml-cpp throws on some shape mismatches (indexing a scalar, converting a map); the
  // checks below return errors first, and this turns whatever slips past into one too.
  try {
    return Build(root, source, options);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", source, e.what()));
  }
}

absl::StatusOr<std::unique_ptr<PluginSet>> PluginSet::Build(const YAML::Node& root,
                                                            std::string_view source,
                                                            const PluginSetOptions& options) {
  if (!root.IsMap())
    return absl::InvalidArgumentError(fmt::format("{}: not a YAML map", source));
  SY_ASSIGN_OR_RETURN(std::string kind,
                      base::YamlField<std::string>(root, "kind", "EndpointPickerConfig"));
  if (kind != "EndpointPickerConfig") {
    return absl::InvalidArgumentError(
        fmt::format("{}: kind must be EndpointPickerConfig, got '{}'", source, kind));
  }
  std::unique_ptr<PluginSet> set(new PluginSet());
  std::string secret =
      options.session_token_secret.empty() ? base::RandomBytes(32) : options.session_token_secret;
  set->session_codec_ = std::make_unique<SessionTokenCodec>(std::move(secret));
  std::vector<std::string> order;                   // plugin names in config order
  std::map<std::string, std::string> plugin_types;  // every plugin's, flow-control policies too
  std::optional<DisaggSpec> disagg = std::nullopt;
  const YAML::Node plugins = root["plugins"];
  if (!plugins || !plugins.IsSequence() || plugins.size() == 0)
    return absl::InvalidArgumentError(fmt::format("{}: plugins must be a non-empty list", source));
  for (size_t i = 0; i < plugins.size(); ++i) {
    const YAML::Node& p = plugins[i];
    const std::string where = fmt::format("{}: plugins[{}]", source, i);
    SY_ASSIGN_OR_RETURN(std::string type, base::YamlField<std::string>(p, "type", ""));
    SY_ASSIGN_OR_RETURN(std::string name, base::YamlField<std::string>(p, "name", type));
    if (!plugin_types.emplace(name, type).second)
      return absl::InvalidArgumentError(fmt::format("{}: duplicate plugin name '{}'", where, name));
    // Flow-control policies are named by the flowControl section, not run by profiles.
    if (flow::FairnessPolicyTypeNamed(type).has_value() ||
        flow::OrderingPolicyTypeNamed(type).has_value()) {
      continue;
    }
    auto factory = Registry().find(type);
    if (factory == Registry().end()) {
      return absl::InvalidArgumentError(fmt::format("{}: unknown plugin type '{}'", where, type));
    }
    const YAML::Node params = p["parameters"] ? p["parameters"] : YAML::Node(YAML::NodeType::Map);
    if (!params.IsMap())
      return absl::InvalidArgumentError(fmt::format("{}: parameters must be a map", where));
    SY_ASSIGN_OR_RETURN(
        Built built,
        factory->second(params, where,
                        {&set->approx_index_, &set->precise_index_, &set->approx_block_size_,
                         &set->precise_block_size_, set->session_codec_.get(),
                         &set->issues_session_tokens_, &set->observers_, &set->session_plugins_}));
    if (built.disagg.has_value()) {
      if (disagg.has_value()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: more than one disagg-profile-handler", where));
      }
      disagg = std::move(built.disagg);
    }
    set->plugins_[name] = Owned{type,
                                std::move(built.filter),
                                std::move(built.scorer),
                                std::move(built.picker),
                                built.pre_request,
                                std::move(built.decider),
                                std::move(built.p2p_source),
                                built.detector};
    order.push_back(name);
  }

  // (profile name, [(pluginRef, weight)])
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> specs;
  const YAML::Node profiles = root["schedulingProfiles"];
  if (!profiles || profiles.size() == 0) {
    std::vector<std::pair<std::string, double>> all;
    all.reserve(order.size());
    // (`order` holds scheduling plugins only: flow-control policies are not in it.)
    for (const std::string& name : order)
      all.emplace_back(name, 1.0);
    specs.emplace_back("default", std::move(all));
  } else {
    for (size_t i = 0; i < profiles.size(); ++i) {
      const std::string where = fmt::format("{}: schedulingProfiles[{}]", source, i);
      SY_ASSIGN_OR_RETURN(std::string name, base::YamlField<std::string>(profiles[i], "name", ""));
      if (name.empty())
        return absl::InvalidArgumentError(fmt::format("{}: a profile needs a name", where));
      std::vector<std::pair<std::string, double>> refs;
      const YAML::Node refs_node = profiles[i]["plugins"];
      for (size_t j = 0; refs_node && j < refs_node.size(); ++j) {
        SY_ASSIGN_OR_RETURN(std::string ref,
                            base::YamlField<std::string>(refs_node[j], "pluginRef", ""));
        SY_ASSIGN_OR_RETURN(double weight, base::YamlField<double>(refs_node[j], "weight", 1.0));
        if (!set->plugins_.contains(ref)) {
          return absl::InvalidArgumentError(
              plugin_types.contains(ref)
                  ? fmt::format("{}.plugins[{}]: '{}' is a flow-control policy ({}), which the "
                                "flowControl section names, not a profile",
                                where, j, ref, plugin_types.at(ref))
                  : fmt::format("{}.plugins[{}]: no plugin named '{}'", where, j, ref));
        }
        if (!(weight >= 0)) {
          return absl::InvalidArgumentError(
              fmt::format("{}.plugins[{}]: weight must be >= 0", where, j));
        }
        // Only scores are weighted: a weight on a filter or picker would silently do nothing.
        if (refs_node[j]["weight"] && set->plugins_.at(ref).scorer == nullptr) {
          return absl::InvalidArgumentError(fmt::format(
              "{}.plugins[{}]: profile '{}' gives a weight to plugin '{}' ({}), which is not a "
              "scorer",
              where, j, name, ref, set->plugins_.at(ref).type));
        }
        refs.emplace_back(ref, weight);
      }
      specs.emplace_back(name, std::move(refs));
    }
  }

  // llm-d runs several profiles only through a profile handler; without the
  // disagg-profile-handler the router runs its one profile for every request, as llm-d's
  // single-profile-handler does.
  if (specs.size() > 1 && !disagg.has_value()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: schedulingProfiles has {} profiles; the router runs exactly one (llm-d's "
        "single-profile-handler) unless a disagg-profile-handler runs a decode and a prefill one",
        source, specs.size()));
  }
  for (auto& [name, refs] : specs) {
    std::vector<Filter*> filters;
    std::vector<WeightedScorer> scorers;
    std::vector<PreRequest*> pre_requests;
    Picker* picker = nullptr;
    const P2pSourceProducer* p2p_source = nullptr;
    for (const auto& [ref, weight] : refs) {
      Owned& plugin = set->plugins_.at(ref);
      if (plugin.filter != nullptr)
        filters.push_back(plugin.filter.get());
      if (plugin.scorer != nullptr)
        scorers.push_back({ref, plugin.scorer.get(), weight});
      if (plugin.pre_request != nullptr)
        pre_requests.push_back(plugin.pre_request);
      if (plugin.picker != nullptr) {
        if (picker != nullptr) {
          return absl::InvalidArgumentError(
              fmt::format("{}: profile '{}' has more than one picker", source, name));
        }
        picker = plugin.picker.get();
      }
      if (plugin.p2p_source != nullptr) {
        if (p2p_source != nullptr) {
          return absl::InvalidArgumentError(
              fmt::format("{}: profile '{}' has more than one p2p-source-producer", source, name));
        }
        p2p_source = plugin.p2p_source.get();
      }
    }
    if (picker == nullptr) {
      // llm-d's default: max-score-picker, owned under a profile-private name.
      const std::string default_name = fmt::format("{}/max-score-picker", name);
      set->plugins_[default_name] =
          Owned{"max-score-picker", nullptr, nullptr, std::make_unique<MaxScorePicker>(1), nullptr};
      picker = set->plugins_.at(default_name).picker.get();
    }
    set->profiles_.push_back(std::make_unique<SchedulingProfile>(
        name, std::move(filters), std::move(scorers), picker, std::move(pre_requests), p2p_source));
  }
  if (disagg.has_value()) {
    DisaggProfiles handler{set->profile(disagg->decode_profile),
                           set->profile(disagg->prefill_profile), nullptr};
    for (const auto& [profile, name] : {std::pair{handler.decode, &disagg->decode_profile},
                                        std::pair{handler.prefill, &disagg->prefill_profile}}) {
      if (profile == nullptr) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: disagg-profile-handler: no scheduling profile named '{}'", source, *name));
      }
    }
    if (handler.decode == handler.prefill) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: disagg-profile-handler: the decode and prefill profiles must differ", source));
    }
    auto decider = set->plugins_.find(disagg->decider_ref);
    if (decider == set->plugins_.end() || decider->second.decider == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}: disagg-profile-handler: deciders.prefill '{}' is not a pd decider",
                      source, disagg->decider_ref));
    }
    handler.decider = decider->second.decider.get();
    // Only the decode profile's pick is the request's endpoint.
    if (handler.prefill->p2p_source() != nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}: disagg-profile-handler: the prefill profile '{}' has a "
                      "p2p-source-producer (it belongs in the decode profile)",
                      source, disagg->prefill_profile));
    }
    set->disagg_ = handler;
  }
  SY_ASSIGN_OR_RETURN(set->flow_control_, flow::ParseFlowControlConfig(root, plugin_types, source));
  if (set->flow_control_.enabled &&
      set->saturation_detector(set->flow_control_.saturation_detector) == nullptr) {
    // llm-d's default detector needs no plugin entry; any other must name one.
    if (set->flow_control_.saturation_detector != "utilization-detector" ||
        plugin_types.contains("utilization-detector")) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: flowControl.saturationDetector: '{}' is not a saturation detector plugin "
          "(utilization-detector or concurrency-detector)",
          source, set->flow_control_.saturation_detector));
    }
    auto detector = std::make_unique<flow::UtilizationDetector>(flow::UtilizationDetectorOptions{});
    const flow::SaturationDetector* raw = detector.get();
    set->plugins_["utilization-detector"] = Owned{"utilization-detector",
                                                  std::move(detector),
                                                  nullptr,
                                                  nullptr,
                                                  nullptr,
                                                  nullptr,
                                                  nullptr,
                                                  raw};
  }
  return set;
}

}  // namespace switchyard::router
