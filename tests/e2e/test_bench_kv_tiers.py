"""The KV tier benchmarks' --smoke runs on tiny-llama3, so that they keep working:
bench/kv_tier_ttft.py for each tier (each of its three requests must be served from where it
claims: nothing cached, the pool, the tier, which the script checks on the engine's counters),
bench/kv_tier_overlap.py (the tier must store the background prompts' blocks),
bench/kv_peer_ttft.py (the peer step must load its prefix from the other engine),
bench/kv_capacity_workload.py (every tier configuration must load blocks back and hit more
than tiers off; with a dominant session-affinity scorer no conversation changes engine), and
bench/pd_disagg_bench.py (the P/D fleet must move every long prompt's KV)."""
import pytest

from conftest import bench_smoke as smoke


@pytest.mark.parametrize("tier", ["host", "disk", "redis"])
def test_kv_tier_ttft_bench_smoke(switchyard, tmp_path, tier):
    result, stdout = smoke("kv_tier_ttft.py", tmp_path, "--tier", tier)
    run = result["runs"][0]
    # 255 of the prompt's 256 tokens may hit: the 15 full blocks before the last token.
    assert (run["recompute"]["pool_hits"], run["recompute"]["tier_hits"]) == (0, 0)
    assert (run["pool"]["pool_hits"], run["pool"]["tier_hits"]) == (240, 0)
    assert (run["host"]["pool_hits"], run["host"]["tier_hits"]) == (0, 240)
    assert run["host"]["loaded_bytes"] > 0
    assert f"| tiny-llama3 | {tier} | 256 |" in stdout


def test_kv_tier_overlap_bench_smoke(switchyard, tmp_path):
    result, stdout = smoke("kv_tier_overlap.py", tmp_path)
    [run] = result["runs"]
    assert run["off"]["stored_blocks"] == 0 < run["on"]["stored_blocks"]
    assert run["on"]["background_prompts"] > 0 and run["on"]["gaps"] > 0


def test_kv_peer_ttft_bench_smoke(switchyard, tmp_path):
    result, stdout = smoke("kv_peer_ttft.py", tmp_path)
    [run] = result["runs"]
    assert (run["recompute"]["pool_hits"], run["recompute"]["external"]) == (0, 0)
    assert (run["pool"]["pool_hits"], run["pool"]["external"]) == (240, 0)
    assert (run["peer"]["pool_hits"], run["peer"]["external"], run["peer"]["pulls"]) == \
        (0, 240, 1)
    assert "| tiny-llama3 | 256 |" in stdout


def test_kv_capacity_workload_bench_smoke(switchyard, tmp_path):
    result, stdout = smoke("kv_capacity_workload.py", tmp_path, timeout=300)
    results = {r["config"]: r for r in result["results"]}
    assert set(results) == {"unbounded", "off", "host", "host+disk", "shared"}
    # Every tier brings back what the small pools dropped: loads, and more hits than off.
    for config in ("host", "host+disk", "shared"):
        assert results[config]["tier_loads"] > 0, config
        assert results[config]["hit_rate"] > results["off"]["hit_rate"], config
    assert results["unbounded"]["hit_rate"] >= results["host"]["hit_rate"]
    assert all(r["requests"] == 36 for r in results.values())


def test_kv_capacity_workload_session_affinity_keeps_conversations_in_place(switchyard,
                                                                          tmp_path):
    # A session-affinity weight above every other scorer's sum (3 + 2 + 2): each turn goes to
    # the engine of its conversation's last turn, so none moves.
    result, _ = smoke("kv_capacity_workload.py", tmp_path, "--configs", "host",
                      "--session-affinity", "10", timeout=300)
    [host] = result["results"]
    assert host["requests"] == 36
    assert host["moved_turns"] == 0
    assert host["tier_loads"] > 0


def test_pd_disagg_bench_smoke(switchyard, tmp_path):
    result, stdout = smoke("pd_disagg_bench.py", tmp_path, timeout=300)
    results = {r["fleet"]: r for r in result["results"]}
    # Both long prompts (511 tokens of full blocks each) moved from the prefill engine.
    assert results["pd"]["loaded_tokens"] == 2 * 496
    assert results["aggregated"]["loaded_tokens"] == 0
    assert all(r["long_prompts"] == 2 and not r["errors"] for r in results.values())
