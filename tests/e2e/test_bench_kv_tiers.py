"""The KV tier benchmarks' --smoke runs on tiny-llama3, so that they keep working:
bench/kv_tier_ttft.py for each tier (each of its three requests must be served from where it
claims: nothing cached, the pool, the tier, which the script checks on the engine's counters)
bench/kv_tier_overlap.py (the tier must store the background prompts' blocks) and
bench/kv_peer_ttft.py (the peer step must load its prefix from the other engine)."""
import json
import subprocess
import sys

import pytest

from conftest import REPO, switchyard_bin


@pytest.mark.parametrize("tier", ["host", "disk", "redis"])
def test_kv_tier_ttft_bench_smoke(switchyard, tmp_path, tier):
    out = tmp_path / "kv_tier_ttft.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "kv_tier_ttft.py"), "--smoke", "--tier", tier,
         "--bin", str(switchyard_bin()), "--out-dir", str(tmp_path), "--json-out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads(out.read_text())["runs"][0]
    # 255 of the prompt's 256 tokens may hit: the 15 full blocks before the last token.
    assert (run["recompute"]["pool_hits"], run["recompute"]["tier_hits"]) == (0, 0)
    assert (run["pool"]["pool_hits"], run["pool"]["tier_hits"]) == (240, 0)
    assert (run["host"]["pool_hits"], run["host"]["tier_hits"]) == (0, 240)
    assert run["host"]["loaded_bytes"] > 0
    assert f"| tiny-llama3 | {tier} | 256 |" in proc.stdout


def test_kv_tier_overlap_bench_smoke(switchyard, tmp_path):
    out = tmp_path / "kv_tier_overlap.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "kv_tier_overlap.py"), "--smoke", "--bin",
         str(switchyard_bin()), "--out-dir", str(tmp_path), "--json-out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = json.loads(out.read_text())["runs"]
    assert run["off"]["stored_blocks"] == 0 < run["on"]["stored_blocks"]
    assert run["on"]["background_prompts"] > 0 and run["on"]["gaps"] > 0


def test_kv_peer_ttft_bench_smoke(switchyard, tmp_path):
    out = tmp_path / "kv_peer_ttft.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "kv_peer_ttft.py"), "--smoke", "--bin",
         str(switchyard_bin()), "--out-dir", str(tmp_path), "--json-out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = json.loads(out.read_text())["runs"]
    assert (run["recompute"]["pool_hits"], run["recompute"]["external"]) == (0, 0)
    assert (run["pool"]["pool_hits"], run["pool"]["external"]) == (240, 0)
    assert (run["peer"]["pool_hits"], run["peer"]["external"], run["peer"]["pulls"]) == \
        (0, 240, 1)
    assert "| tiny-llama3 | 256 |" in proc.stdout
