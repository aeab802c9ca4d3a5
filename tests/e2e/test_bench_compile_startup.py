"""bench/compile_startup_bench.py --smoke (one run of each start on tiny-llama3), so that it
keeps working: the cold start compiles, the warm ones load from the host directory and from
Redis, and the eager one compiles nothing."""
from conftest import bench_smoke


def test_compile_startup_bench_smoke(switchyard, tmp_path):
    output, stdout = bench_smoke("compile_startup_bench.py", tmp_path, timeout=120)
    runs = output["runs"]
    assert [r["sources"] for r in runs["cold"]] == ["compiled"]
    assert [r["sources"] for r in runs["warm-host"]] == ["host"]
    assert [r["sources"] for r in runs["warm-redis"]] == ["redis"]
    assert [r["sources"] for r in runs["eager"]] == ["-"]
    assert all(r["first_token"] >= r["ready"] > 0 for kind in runs.values() for r in kind)
    assert "of cold (goal <= 10%)" in stdout
