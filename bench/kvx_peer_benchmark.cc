// KV blocks pulled from a peer over loopback TCP:
//   BM_PeerReadBlocks/<blocks>: PeerBlockClient::ReadBlocks of that many blocks of a
//     Llama-3.2-1B-shaped pool (16 layers, 8 KV heads, head_dim 64, block 16, f16:
//     512 KiB a block, 32 segments) from a PeerBlockServer in this process, into an
//     interleaved host store; bytes_per_second counts KV bytes.
// bench/kvx_peer_bench.py runs it beside iperf3's single loopback stream and Mooncake's
// TransferEngine over TCP reading the same blocks (the peers).
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "kvx/kv_block_layout.h"
#include "kvx/memory_region.h"
#include "kvx/peer_block_client.h"
#include "kvx/peer_block_server.h"

namespace switchyard::kvx {
namespace {

constexpr int64_t kPoolBlocks = 256;

KvBlockLayout BenchLayout() {
  return *KvBlockLayout::ForKvCache(/*num_layers=*/16, /*block_size=*/16, /*kv_heads=*/8,
                                    /*head_dim=*/64, /*dtype_bytes=*/2);
}

// Lends every block; the benchmark measures the wire, not the engine's pinning.
class LendEverything : public PeerBlockSource {
 public:
  absl::StatusOr<PeerLookupResult> Lookup(std::span<const PeerDigest>) override {
    return PeerLookupResult{};
  }
  absl::StatusOr<uint64_t> BeginRead(std::span<const int32_t>) override { return 0; }
  void EndRead(uint64_t) override {}
  void Release(std::span<const int32_t>) override {}
};

void BM_PeerReadBlocks(benchmark::State& state) {
  const KvBlockLayout layout = BenchLayout();
  const int64_t n = state.range(0);
  std::vector<std::vector<std::byte>> pools(layout.num_segments());
  std::vector<std::span<std::byte>> spans;
  for (size_t s = 0; s < pools.size(); ++s) {
    pools[s].assign(layout.segment_bytes(s) * kPoolBlocks, std::byte{static_cast<uint8_t>(s)});
    spans.emplace_back(pools[s]);
  }
  LendEverything source;
  PeerHandshakeOptions handshake{.engine_id = "bench", .secret = "bench"};
  auto server = PeerBlockServer::Start(
      {.handshake = handshake}, *MemoryRegion::ForPools(layout, spans, kPoolBlocks), &source);
  if (!server.ok()) {
    state.SkipWithError(server.status().ToString().c_str());
    return;
  }
  auto client =
      PeerBlockClient::Connect("127.0.0.1", (*server)->port(), handshake, absl::Seconds(30));
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  std::vector<std::byte> store(layout.block_bytes() * static_cast<size_t>(n));
  const MemoryRegion dst = *MemoryRegion::ForInterleaved(layout, store, n);
  std::vector<int64_t> remote(static_cast<size_t>(n));
  std::vector<int32_t> local(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    remote[static_cast<size_t>(i)] = (i * 7) % kPoolBlocks;
    local[static_cast<size_t>(i)] = i;
  }
  for (auto _ : state) {
    if (absl::Status s = (*client)->ReadBlocks(remote, dst, local); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * n * static_cast<int64_t>(layout.block_bytes()));
}
BENCHMARK(BM_PeerReadBlocks)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace switchyard::kvx

BENCHMARK_MAIN();
