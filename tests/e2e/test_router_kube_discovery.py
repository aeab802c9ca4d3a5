"""The router's InferencePool discovery against a real kube-apiserver with etcd (the
kube_cluster fixture; no kubelet: the tests create pods and set their status as one would).

Sim engines listen on 127.0.0.2, 127.0.0.3, ... on one port, so a pod's IP is an engine's
address. Pods added, made ready, relabelled, made unready and deleted show in the router's
/debug/endpoints within 1 s; /ready waits for the first pod list; an API server restart loses
no update made right after it; a request through the router is answered by a discovered
engine; a kubeconfig with a bad token is logged clearly and retried."""
import itertools
import json
import pathlib
import time

import pytest
import requests

from engine_server import MODEL_NAME, EngineServer
from peer_servers import free_port
from router_server import Router, metric_sum
from test_router_ext_proc import NOT_SERVING, grpc_ports, health

# Needs the Kubernetes tools: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

POOL = "engines"
ROLE = "llm-d.ai/role"
_namespaces = itertools.count()

# Only decode (or unlabelled) endpoints take requests: relabelling a pod moves traffic.
DECODE_ONLY = ("scheduling:\n  plugins:\n  - type: decode-filter\n  - type: random-picker\n"
               "  schedulingProfiles:\n  - name: default\n    plugins:\n"
               "    - {pluginRef: decode-filter}\n    - {pluginRef: random-picker}\n")


@pytest.fixture(scope="module")
def engines():
    """Three sim engines, one port, on 127.0.0.2..4 (their "pod IPs")."""
    port = free_port()
    fleet = [EngineServer("--backend", "sim", "--sim-latency", "zero", host=f"127.0.0.{i}",
                          port=port) for i in (2, 3, 4)]
    for e in fleet:
        e.spawn()
    for e in fleet:
        e.wait_ready()
    yield port, fleet
    for e in fleet:
        e.stop()


def fresh_namespace(cluster):
    name = f"kd-{next(_namespaces)}-{int(time.time() * 1000) % 100000}"
    cluster.create_namespace(name)
    return name


def apply_pool(cluster, namespace, ports, match_labels=None):
    cluster.apply(json.dumps({
        "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
        "metadata": {"name": POOL, "namespace": namespace},
        "spec": {"selector": {"matchLabels": match_labels or {"app": "sim"}},
                 "targetPorts": [{"number": p} for p in ports],
                 "endpointPickerRef": {"name": "switchyard-router", "port": {"number": 9002}}},
    }))


def pool_with_pods(cluster, port, pods):
    """A fresh namespace with the InferencePool (app=sim, `port`) and `pods`, {name: (app
    label, IP or None)}: those with an IP made ready. Returns the namespace."""
    namespace = fresh_namespace(cluster)
    apply_pool(cluster, namespace, [port])
    for name, (app, ip) in pods.items():
        cluster.create_pod(name, {"app": app}, namespace=namespace)
        if ip:
            cluster.set_pod_status(name, ip, namespace=namespace)
    return namespace


def start_router(namespace, kubeconfig, **kwargs):
    pools = (f"pools:\n- name: kube\n  inferencePool: {{namespace: {namespace}, name: {POOL}}}\n"
             f"  kubeconfig: {kubeconfig}\n  engine: switchyard\n")
    return Router([], pools=pools, wait_fresh=[], **kwargs)


def endpoints_by_name(router):
    return {e["name"]: e for e in router.endpoints()}


def wait_for(router, check, what, timeout_s):
    """Polls /debug/endpoints until check(endpoints by name) holds; returns the seconds taken."""
    start = time.monotonic()
    while True:
        current = endpoints_by_name(router)
        if check(current):
            return time.monotonic() - start
        assert time.monotonic() - start < timeout_s, f"{what}: still {sorted(current)}"
        time.sleep(0.01)


def ready_status(router):
    return requests.get(f"{router.url}/ready", timeout=5).status_code


def test_pods_are_followed_within_a_second(kube_cluster, engines):
    port, _ = engines
    ns = fresh_namespace(kube_cluster)
    a, b = f"127.0.0.2:{port}", f"127.0.0.3:{port}"
    router = start_router(ns, kube_cluster.kubeconfig, scheduling=DECODE_ONLY)
    try:
        # No InferencePool yet: no pod list, so not ready (/health is: the process is up).
        time.sleep(0.5)
        assert ready_status(router) == 503
        assert requests.get(f"{router.url}/health", timeout=5).status_code == 200
        apply_pool(kube_cluster, ns, [port])
        deadline = time.monotonic() + 5
        while ready_status(router) != 200:
            assert time.monotonic() < deadline, "not ready after the InferencePool appeared"
            time.sleep(0.02)
        assert endpoints_by_name(router) == {}

        latencies = {}
        kube_cluster.create_pod("a", {"app": "sim", ROLE: "decode"}, namespace=ns)
        kube_cluster.create_pod("other", {"app": "else"}, namespace=ns)
        kube_cluster.set_pod_status("other", "127.0.0.4", namespace=ns)
        kube_cluster.set_pod_status("a", "127.0.0.2", namespace=ns)
        latencies["ready"] = wait_for(router, lambda e: set(e) == {a}, "a ready", 1)
        assert endpoints_by_name(router)[a]["labels"] == {"app": "sim", ROLE: "decode"}
        assert endpoints_by_name(router)[a]["pool"] == "kube"

        kube_cluster.create_pod("b", {"app": "sim", ROLE: "decode"}, namespace=ns)
        kube_cluster.set_pod_status("b", "127.0.0.3", namespace=ns)
        latencies["second"] = wait_for(router, lambda e: set(e) == {a, b}, "b ready", 1)

        # A request through the router is answered by a discovered engine.
        seen = set()
        for i in range(8):
            r = requests.post(f"{router.url}/v1/completions", timeout=30, json={
                "model": MODEL_NAME, "prompt": f"kube {i}", "max_tokens": 2})
            assert r.status_code == 200, r.text
            seen.add(r.headers["x-switchyard-endpoint"])
        assert seen <= {a, b} and seen

        # Relabelled to prefill: the decode filter sends it nothing more.
        kube_cluster.label_pod("b", {ROLE: "prefill"}, namespace=ns)
        latencies["relabel"] = wait_for(
            router, lambda e: e.get(b, {}).get("labels", {}).get(ROLE) == "prefill", "relabel", 1)
        for i in range(6):
            r = requests.post(f"{router.url}/v1/completions", timeout=30, json={
                "model": MODEL_NAME, "prompt": f"decode only {i}", "max_tokens": 2})
            assert r.status_code == 200, r.text
            assert r.headers["x-switchyard-endpoint"] == a

        # Labelled out of the selector, unready, deleted: each leaves the pool.
        kube_cluster.label_pod("b", {"app": None}, namespace=ns)
        latencies["unselected"] = wait_for(router, lambda e: set(e) == {a}, "b unselected", 1)
        kube_cluster.set_pod_status("a", "127.0.0.2", ready=False, namespace=ns)
        latencies["unready"] = wait_for(router, lambda e: e == {}, "a unready", 1)
        kube_cluster.set_pod_status("a", "127.0.0.2", namespace=ns)
        latencies["ready again"] = wait_for(router, lambda e: set(e) == {a}, "a ready again", 1)
        kube_cluster.delete_pod("a", namespace=ns)
        latencies["deleted"] = wait_for(router, lambda e: e == {}, "a deleted", 1)
        print("discovery latency after kubectl returned (s):",
              {k: round(v, 3) for k, v in latencies.items()})
        assert all(v < 1 for v in latencies.values()), latencies
    finally:
        router.stop()


def test_selector_and_port_changes_are_followed(kube_cluster, engines):
    port, _ = engines
    ns = pool_with_pods(kube_cluster, port, {"x": ("sim", "127.0.0.2"), "y": ("sim2", "127.0.0.3")})
    router = start_router(ns, kube_cluster.kubeconfig)
    try:
        wait_for(router, lambda e: set(e) == {f"127.0.0.2:{port}"}, "x", 5)
        assert ready_status(router) == 200
        apply_pool(kube_cluster, ns, [port], match_labels={"app": "sim2"})
        wait_for(router, lambda e: set(e) == {f"127.0.0.3:{port}"}, "selector change", 1)
        # A second target port: each ready pod is an endpoint on each.
        apply_pool(kube_cluster, ns, [port, port + 1], match_labels={"app": "sim2"})
        wait_for(router, lambda e: set(e) == {f"127.0.0.3:{port}", f"127.0.0.3:{port + 1}"},
                 "port added", 1)
        kube_cluster.kubectl("delete", "inferencepool", POOL, "-n", ns)
        wait_for(router, lambda e: e == {}, "pool deleted", 1)
    finally:
        router.stop()


def test_watch_resumes_after_an_api_server_restart(kube_cluster, engines):
    port, _ = engines
    ns = pool_with_pods(kube_cluster, port, {"c": ("sim", "127.0.0.2"), "d": ("sim", None)})
    router = start_router(ns, kube_cluster.kubeconfig)
    try:
        wait_for(router, lambda e: set(e) == {f"127.0.0.2:{port}"}, "c", 5)
        kube_cluster.restart_apiserver()
        # The update made just after the restart is not lost.
        kube_cluster.set_pod_status("d", "127.0.0.3", namespace=ns)
        took = wait_for(router, lambda e: set(e) == {f"127.0.0.2:{port}", f"127.0.0.3:{port}"},
                        "d after the restart", 15)
        print(f"update after the restart seen in {took:.2f} s")
        # And the watch goes on: later events arrive as fast as before.
        kube_cluster.set_pod_status("c", "127.0.0.2", ready=False, namespace=ns)
        assert wait_for(router, lambda e: set(e) == {f"127.0.0.3:{port}"}, "c unready", 1) < 1
        text = router.metrics()
        restarts = metric_sum(text, "switchyard_router_kube_watch_restarts_total", pool="kube",
                              resource="pods")
        assert restarts >= 1, text
        assert ready_status(router) == 200
    finally:
        router.stop()


def test_a_bad_token_is_logged_and_retried(kube_cluster, tmp_path):
    ns = fresh_namespace(kube_cluster)
    config = json.loads(pathlib.Path(kube_cluster.kubeconfig).read_text())
    config["users"][0]["user"]["token"] = "not-the-token"
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(json.dumps(config))
    router = start_router(ns, bad, args=("--ext-proc-port", 0, "--grpc-health-port", 0))
    try:
        deadline = time.monotonic() + 10
        while metric_sum(router.metrics(), "switchyard_router_kube_errors_total", pool="kube",
                         resource="inferencepool") < 2:
            assert time.monotonic() < deadline, router.output()[-3000:]
            time.sleep(0.05)
        log = router.output()
        assert "HTTP 401" in log and "Unauthorized" in log, log[-3000:]
        assert "retrying in" in log, log[-3000:]
        assert ready_status(router) == 503
        # The gateway's view of readiness is the same: gRPC health says NOT_SERVING.
        assert health(grpc_ports(router)[1], b"readiness") == NOT_SERVING
    finally:
        router.stop()
