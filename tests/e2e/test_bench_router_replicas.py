"""bench/router_replicas_bench.py --smoke (one short window each of one and two router
replicas behind haproxy, sharing state through redis), so that it keeps working: both
windows serve every request, and the prefix hit rate the engines report is measured."""
from conftest import bench_smoke


def test_router_replicas_bench_smoke(switchyard, tmp_path):
    output, stdout = bench_smoke("router_replicas_bench.py", tmp_path, timeout=150)
    [run] = output["runs"]
    for replicas in ("1", "2"):
        window = run[replicas]
        assert window["requests"] > 0 and window["errors"] == 0
        assert window["status_errors"] == 0
        assert 0 < window["hit_rate"] <= 1
        assert window["router_cpu_us_per_request"] > 0
    assert "median: 1 router" in stdout
