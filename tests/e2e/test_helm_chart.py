"""The Helm chart (deploy/helm/switchyard): `helm lint` passes, `helm template` renders what
the values say (replicas, ports, labels, the router's config, RBAC limited to get/list/watch),
and the rendered objects are accepted by the test kube-apiserver, the InferencePool by the
real CRD and the HTTPRoute by the Gateway API's; the real router runs on the rendered
router.yaml."""
import json
import subprocess

import pytest
import requests
import yaml

from conftest import MODELS_DIR, REPO, require_kube_tools, wait_until
from kube_cluster import HELM, HTTP_ROUTE_CRD
from router_server import Router, metric_sum

# Needs helm and the Kubernetes tools: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

CHART = REPO / "deploy" / "helm" / "switchyard"
RELEASE = "demo"
# Every optional part on, two engine kinds with their hardware.
FULL_VALUES = [
    "router.replicas=3", "redis.enabled=true", "gateway.enabled=true",
    "model.volume.persistentVolumeClaim.claimName=models",
    "engines[0].name=prefill", "engines[0].replicas=1", "engines[0].role=prefill",
    "engines[0].hardware.accelerator=nvidia-h100",
    "engines[1].name=decode", "engines[1].replicas=2", "engines[1].role=decode",
    "engines[1].hardware.accelerator=cpu", "engines[1].args={--max-num-seqs,32}",
]


@pytest.fixture(scope="module")
def helm(tmp_path_factory):
    """Runs helm with its caches and config in a temp dir; returns stdout, fails on error."""
    require_kube_tools([HELM, HTTP_ROUTE_CRD])
    home = tmp_path_factory.mktemp("helm")
    env = {"PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")}

    def run(*args):
        proc = subprocess.run([str(HELM), *args], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc.stdout

    return run


def template(helm, namespace, *sets):
    args = ["template", RELEASE, str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    return helm(*args)


def objects(rendered):
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(rendered) if o}


def container(deployment):
    [c] = deployment["spec"]["template"]["spec"]["containers"]
    return c


def test_helm_lint_passes_with_defaults_and_every_part_on(helm):
    helm("lint", "--strict", str(CHART))
    helm("lint", "--strict", str(CHART), *[a for s in FULL_VALUES for a in ("--set", s)])


def test_defaults_render_the_router_engines_pool_and_rbac(helm):
    got = objects(template(helm, "llm"))
    assert set(got) == {
        ("ServiceAccount", "demo-switchyard-router"), ("Role", "demo-switchyard-router"),
        ("RoleBinding", "demo-switchyard-router"), ("ConfigMap", "demo-switchyard-router"),
        ("Service", "demo-switchyard-router"), ("Deployment", "demo-switchyard-router"),
        ("PodDisruptionBudget", "demo-switchyard-router"),
        ("Deployment", "demo-switchyard-engine-decode"), ("InferencePool", "demo-switchyard"),
    }

    router = got[("Deployment", "demo-switchyard-router")]
    assert router["spec"]["replicas"] == 2
    c = container(router)
    assert c["command"] == ["switchyard"]
    assert c["args"][:7] == ["router", "--config", "/etc/switchyard/router.yaml",
                             "--ext-proc-port", "9002", "--grpc-health-port", "9003"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
        "http": 8080, "ext-proc": 9002, "grpc-health": 9003}
    assert router["spec"]["template"]["spec"]["serviceAccountName"] == "demo-switchyard-router"

    config = yaml.safe_load(got[("ConfigMap", "demo-switchyard-router")]["data"]["router.yaml"])
    assert config["listen"]["port"] == 8080
    assert config["pools"] == [{"name": "demo-switchyard", "engine": "switchyard",
                                "inferencePool": {"namespace": "llm", "name": "demo-switchyard"}}]

    role = got[("Role", "demo-switchyard-router")]
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in role["rules"]] == [
        ([""], ["pods"], ["get", "list", "watch"]),
        (["inference.networking.k8s.io"], ["inferencepools"], ["get", "list", "watch"])]
    binding = got[("RoleBinding", "demo-switchyard-router")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-switchyard-router",
                                    "namespace": "llm"}]

    pool = got[("InferencePool", "demo-switchyard")]["spec"]
    assert pool["targetPorts"] == [{"number": 8000}]
    assert pool["endpointPickerRef"] == {"kind": "Service", "name": "demo-switchyard-router",
                                         "port": {"number": 9002}, "failureMode": "FailClose"}
    engine = got[("Deployment", "demo-switchyard-engine-decode")]
    labels = engine["spec"]["template"]["metadata"]["labels"]
    assert pool["selector"]["matchLabels"].items() <= labels.items()
    assert labels["llm-d.ai/role"] == "decode"
    assert labels["switchyard.ai/accelerator"] == "cpu"
    assert container(engine)["args"][:3] == ["engine", "--model", "/models/model"]


def test_values_turn_on_redis_the_http_route_and_more_engines(helm):
    got = objects(template(helm, "llm", *FULL_VALUES))
    assert got[("Deployment", "demo-switchyard-router")]["spec"]["replicas"] == 3
    assert ("Deployment", "demo-switchyard-redis") in got
    assert ("Service", "demo-switchyard-redis") in got

    prefill = got[("Deployment", "demo-switchyard-engine-prefill")]
    decode = got[("Deployment", "demo-switchyard-engine-decode")]
    assert (prefill["spec"]["replicas"], decode["spec"]["replicas"]) == (1, 2)
    prefill_labels = prefill["spec"]["template"]["metadata"]["labels"]
    assert (prefill_labels["llm-d.ai/role"], prefill_labels["switchyard.ai/accelerator"]) == (
        "prefill", "nvidia-h100")
    router_yaml = yaml.safe_load(got[("ConfigMap", "demo-switchyard-router")]["data"]
                                 ["router.yaml"])
    assert router_yaml["sharedState"] == {"redis": "demo-switchyard-redis:6379",
                                          "key": "switchyard:demo"}
    args = container(decode)["args"]
    assert args[-2:] == ["--max-num-seqs", "32"]
    assert args[args.index("--kv-offloading-redis") + 1] == "demo-switchyard-redis:6379"
    assert decode["spec"]["template"]["spec"]["volumes"] == [
        {"name": "model", "persistentVolumeClaim": {"claimName": "models"}}]

    route = got[("HTTPRoute", "demo-switchyard")]["spec"]
    assert route["rules"][0]["backendRefs"] == [{
        "group": "inference.networking.k8s.io", "kind": "InferencePool",
        "name": "demo-switchyard"}]


def test_rendered_objects_apply_to_the_api_server(helm, kube_cluster, kube_namespace):
    kube_cluster.kubectl("apply", "--server-side", "-f", str(HTTP_ROUTE_CRD))
    kube_cluster.wait_crd_established("httproutes.gateway.networking.k8s.io")
    rendered = template(helm, kube_namespace, *FULL_VALUES)

    kube_cluster.apply(rendered, namespace=kube_namespace)

    listed = kube_cluster.get_json(
        "deployments,services,configmaps,serviceaccounts,roles,rolebindings,"
        "poddisruptionbudgets,inferencepools,httproutes", "-n", kube_namespace)["items"]
    applied = {(o["kind"], o["metadata"]["name"]) for o in listed}
    assert set(objects(rendered)) <= applied
    pool = kube_cluster.get_json("inferencepool", "demo-switchyard", "-n", kube_namespace)
    assert pool["spec"]["appProtocol"] == "http"
    # The router's service account may do what the Role says and nothing more.
    account = f"system:serviceaccount:{kube_namespace}:demo-switchyard-router"
    for verb, group, resource, allowed in [
            ("watch", "", "pods", True), ("get", "", "pods", True),
            ("list", "inference.networking.k8s.io", "inferencepools", True),
            ("update", "", "pods", False), ("list", "", "secrets", False),
            ("patch", "inference.networking.k8s.io", "inferencepools", False)]:
        assert may(kube_cluster, account, verb, group, resource, kube_namespace) == allowed, (
            verb, resource)


def may(cluster, user, verb, group, resource, namespace):
    """The API server's answer to a SubjectAccessReview: may `user` do this?"""
    review = cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts"], "resourceAttributes": {
            "verb": verb, "group": group, "resource": resource, "namespace": namespace}}}))
    return json.loads(review)["status"]["allowed"]


def test_the_router_runs_on_the_rendered_config(helm, kube_cluster, kube_namespace, tmp_path,
                                                switchyard):
    """The real router accepts the chart's router.yaml (every part on): pointed at the test
    API server (a kubeconfig in place of the pod's service account, a free port), it lists
    the InferencePool's pods and is ready; the chart's Redis, which does not resolve here,
    leaves it on its own view (fail-open), not down."""
    rendered = template(helm, kube_namespace, *FULL_VALUES)
    kube_cluster.apply(rendered, namespace=kube_namespace)
    config = yaml.safe_load(objects(rendered)[("ConfigMap", "demo-switchyard-router")]["data"]
                            ["router.yaml"])
    config["listen"] = {"host": "127.0.0.1", "port": 0}
    config["pools"][0]["kubeconfig"] = str(kube_cluster.kubeconfig)
    config["tokenizer"] = str(MODELS_DIR / "tiny-llama3")
    pools = "pools:\n" + yaml.safe_dump(config.pop("pools"))
    extra = yaml.safe_dump({k: v for k, v in config.items()
                            if k not in ("listen", "model", "tokenizer")})
    router = Router([], pools=pools, wait_fresh=[], model=config["model"], extra=extra)
    try:
        wait_until(lambda: requests.get(f"{router.url}/ready", timeout=5).status_code == 200,
                   "the router listed the pool's pods")
        assert metric_sum(router.metrics(), "switchyard_router_shared_state_connected") == 0
    finally:
        router.stop()
