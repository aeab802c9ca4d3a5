// The router's in-process scheduling path for one ~100k-token request over 100 endpoints
// with precise prefix scoring (docs/benchmarks.md, "Picker cost"): prefix keys of the
// prompt, the precise index lookup, and a whole profile run (keys + lookup + prefix, queue
// and kv-cache scorers + max-score-picker). Every endpoint holds its own 100k-token
// prefix in the index; the request shares all but its last 512 tokens with one of them.
// CI runs it once as a smoke test; timings on shared runners are not a gate.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "fmt/format.h"

#include "router/prefix/block_keys.h"
#include "router/prefix/prefix_index.h"
#include "router/router_config.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router {
namespace {

constexpr int kEndpoints = 100;
constexpr int kPromptTokens = 100'000;
constexpr int kFreshTokens = 512;
constexpr int32_t kBlockSize = 16;
constexpr size_t kMaxBlocks = 8192;
constexpr char kModel[] = "bench";

std::vector<int32_t> RandomTokens(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int32_t> id(0, 999);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out)
    t = id(rng);
  return out;
}

// 100 endpoints, each holding the keys of its own prompt; the request is endpoint 37's
// prompt with its last kFreshTokens replaced.
struct Fleet {
  std::vector<Endpoint> endpoints;
  std::vector<int32_t> request;

  explicit Fleet(PrefixIndex* index) {
    std::mt19937 rng(7);
    const uint64_t seed = PrefixSeed(kModel, "");
    for (int i = 0; i < kEndpoints; ++i) {
      Endpoint e;
      e.name = e.address = fmt::format("10.0.0.{}:8000", i);
      e.metrics.waiting_requests = i % 3;
      e.metrics.kv_cache_usage = 0.01 * i;
      std::vector<int32_t> prompt = RandomTokens(rng, kPromptTokens);
      index->Add(e.name, BlockKeys(seed, prompt, kBlockSize, false, kMaxBlocks));
      if (i == 37) {
        request = prompt;
        std::vector<int32_t> fresh = RandomTokens(rng, kFreshTokens);
        std::copy(fresh.begin(), fresh.end(), request.end() - kFreshTokens);
      }
      endpoints.push_back(std::move(e));
    }
  }

  Candidates Ptrs() const {
    Candidates out;
    for (const Endpoint& e : endpoints)
      out.push_back(&e);
    return out;
  }
};

void BM_PrefixKeys100k(benchmark::State& state) {
  std::mt19937 rng(1);
  const std::vector<int32_t> tokens = RandomTokens(rng, kPromptTokens);
  const uint64_t seed = PrefixSeed(kModel, "");
  for (auto _ : state)
    benchmark::DoNotOptimize(BlockKeys(seed, tokens, kBlockSize, false, kMaxBlocks));
  state.SetItemsProcessed(state.iterations() * kPromptTokens);
}
BENCHMARK(BM_PrefixKeys100k)->Unit(benchmark::kMicrosecond);

void BM_PreciseIndexMatch100Endpoints(benchmark::State& state) {
  PrefixIndex index(1 << 20);
  Fleet fleet(&index);
  const std::vector<uint64_t> keys =
      BlockKeys(PrefixSeed(kModel, ""), fleet.request, kBlockSize, false, kMaxBlocks);
  for (auto _ : state) {
    std::vector<PrefixIndex::EndpointMatch> m = index.Match(keys);
    if (m.size() != 1 || m[0].blocks != (kPromptTokens - kFreshTokens) / kBlockSize)
      state.SkipWithError("unexpected match");
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_PreciseIndexMatch100Endpoints)->Unit(benchmark::kMicrosecond);

// A whole scheduling decision as the router makes it per request (keys not cached yet).
void BM_ScheduleRequestPrecise100Endpoints(benchmark::State& state) {
  absl::StatusOr<std::unique_ptr<PluginSet>> set =
      PluginSet::FromYaml(DefaultSchedulingYaml(PrefixScoring::kPrecise), "bench");
  if (!set.ok()) {
    state.SkipWithError(std::string(set.status().message()).c_str());
    return;
  }
  PrefixIndex* index = (*set)->precise_index();
  Fleet fleet(index);
  const SchedulingProfile* profile = (*set)->profile("default");
  const Candidates candidates = fleet.Ptrs();
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    SchedulingRequest request;
    request.model = kModel;
    request.prompt_tokens = fleet.request;
    CycleState cycle;
    ProfileResult r = profile->Run(request, cycle, candidates, rng);
    if (r.picked.empty() || r.picked[0]->name != fleet.endpoints[37].name)
      state.SkipWithError("picked the wrong endpoint");
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ScheduleRequestPrecise100Endpoints)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace switchyard::router

BENCHMARK_MAIN();
