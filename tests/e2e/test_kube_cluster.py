"""The Kubernetes test harness (kube_cluster.KubeCluster) against its real kube-apiserver: pods
made ready by the test are what a label-selector list returns, the shipped InferencePool CRD
accepts and rejects what its schema says, and objects outlive an API server restart."""
import json

import pytest
import requests

from kube_cluster import INFERENCE_POOL_CRD_NAME

# Needs the Kubernetes tools: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools


def inference_pool(name, namespace, match_labels, port=8000):
    return json.dumps({
        "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": match_labels},
            "targetPorts": [{"number": port}],
            "endpointPickerRef": {"name": "switchyard-router", "port": {"number": 9002}},
        },
    })


def selected_pods(cluster, namespace, selector):
    """{name: (podIP, Ready condition status)} of the pods a label selector lists."""
    pods = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    return {p["metadata"]["name"]: (
        p["status"].get("podIP"),
        next((c["status"] for c in p["status"].get("conditions", []) if c["type"] == "Ready"),
             None)) for p in pods}


def list_resource_version(cluster, namespace):
    """The resource version of a list of the namespace's pods (what a watch starts from)."""
    pods = cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods")
    return json.loads(pods)["metadata"]["resourceVersion"]


def watch_pods(cluster, namespace, resource_version):
    """The events of a 1-second watch of the namespace's pods from `resource_version`:
    (type, the pod's llm-d.ai/role label) or, for an error, ("ERROR", its code)."""
    response = requests.get(
        f"{cluster.url}/api/v1/namespaces/{namespace}/pods",
        params={"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "1"},
        headers={"Authorization": f"Bearer {cluster.token}"}, verify=cluster.ca_file,
        timeout=10)
    events = [json.loads(line) for line in response.text.splitlines()]
    return [(e["type"], e["object"]["code"]) if e["type"] == "ERROR" else
            (e["type"], e["object"]["metadata"]["labels"].get("llm-d.ai/role")) for e in events]


def test_the_api_server_takes_the_admin_token_and_trusts_no_other(kube_cluster):
    headers = {"Authorization": f"Bearer {kube_cluster.token}"}
    response = requests.get(f"{kube_cluster.url}/api/v1/namespaces/default", headers=headers,
                            verify=kube_cluster.ca_file, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["name"] == "default"
    response = requests.get(f"{kube_cluster.url}/api/v1/namespaces/default",
                            headers={"Authorization": "Bearer not-the-token"},
                            verify=kube_cluster.ca_file, timeout=10)
    assert response.status_code == 401


def test_a_pod_made_ready_is_listed_by_its_labels_with_its_ip(kube_cluster, kube_namespace):
    ns = kube_namespace
    kube_cluster.create_pod("engine-0", {"app": "engine", "llm-d.ai/role": "decode"}, ns)
    kube_cluster.create_pod("engine-1", {"app": "engine", "llm-d.ai/role": "prefill"}, ns)
    kube_cluster.create_pod("other", {"app": "other"}, ns)
    assert selected_pods(kube_cluster, ns, "app=engine") == {
        "engine-0": (None, None), "engine-1": (None, None)}

    kube_cluster.set_pod_status("engine-0", "10.244.0.7", namespace=ns)
    kube_cluster.set_pod_status("engine-1", "10.244.0.8", ready=False, namespace=ns)
    assert selected_pods(kube_cluster, ns, "app=engine") == {
        "engine-0": ("10.244.0.7", "True"), "engine-1": ("10.244.0.8", "False")}
    assert kube_cluster.get_json("pod", "engine-0", "-n", ns)["status"]["phase"] == "Running"

    kube_cluster.label_pod("engine-1", {"llm-d.ai/role": "decode"}, ns)
    assert set(selected_pods(kube_cluster, ns, "llm-d.ai/role=decode")) == {"engine-0", "engine-1"}
    kube_cluster.label_pod("engine-1", {"app": None}, ns)
    assert set(selected_pods(kube_cluster, ns, "app=engine")) == {"engine-0"}

    kube_cluster.delete_pod("engine-0", ns)
    assert selected_pods(kube_cluster, ns, "app=engine") == {}


def test_the_shipped_inference_pool_crd_is_established_and_validates(kube_cluster,
                                                                     kube_namespace):
    crd = kube_cluster.get_json("crd", INFERENCE_POOL_CRD_NAME)
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v1"]
    assert {"type": "Established", "status": "True"}.items() <= next(
        c for c in crd["status"]["conditions"] if c["type"] == "Established").items()

    kube_cluster.apply(inference_pool("pool", kube_namespace, {"app": "engine"}))
    pool = kube_cluster.get_json("inferencepool", "pool", "-n", kube_namespace)
    assert pool["spec"]["selector"] == {"matchLabels": {"app": "engine"}}
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    # The CRD's defaults are applied by the server.
    assert pool["spec"]["endpointPickerRef"]["kind"] == "Service"
    assert pool["spec"]["endpointPickerRef"]["failureMode"] == "FailClose"

    with pytest.raises(RuntimeError, match="selector"):  # matchLabels needs one label
        kube_cluster.apply(inference_pool("empty", kube_namespace, {}))
    with pytest.raises(RuntimeError, match="65535"):
        kube_cluster.apply(inference_pool("bad-port", kube_namespace, {"app": "x"}, port=70000))


def test_objects_outlive_an_api_server_restart(kube_cluster, kube_namespace):
    ns = kube_namespace
    kube_cluster.create_pod("engine-0", {"app": "engine"}, ns)
    kube_cluster.set_pod_status("engine-0", "10.244.1.3", namespace=ns)
    kube_cluster.apply(inference_pool("pool", ns, {"app": "engine"}))
    before = kube_cluster.get_json("pod", "engine-0", "-n", ns)["metadata"]["resourceVersion"]
    listed = list_resource_version(kube_cluster, ns)

    kube_cluster.restart_apiserver()

    pod = kube_cluster.get_json("pod", "engine-0", "-n", ns)
    assert pod["metadata"]["resourceVersion"] == before
    assert pod["status"]["podIP"] == "10.244.1.3"
    assert kube_cluster.get_json("inferencepool", "pool", "-n", ns)["spec"]["selector"] == {
        "matchLabels": {"app": "engine"}}
    # It still takes writes, and resource versions keep counting from etcd's.
    kube_cluster.label_pod("engine-0", {"llm-d.ai/role": "decode"}, ns)
    after = kube_cluster.get_json("pod", "engine-0", "-n", ns)["metadata"]["resourceVersion"]
    assert int(after) > int(before)

    # A watch from the resource version listed before the restart either resumes or, when the
    # new server's watch cache starts past it (it writes its own leases first), is told 410
    # Expired; a client then lists again and watches on from the list's resource version.
    events = watch_pods(kube_cluster, ns, listed)
    assert events in ([("MODIFIED", "decode")], [("ERROR", 410)]), events
    relisted = list_resource_version(kube_cluster, ns)
    kube_cluster.label_pod("engine-0", {"llm-d.ai/role": "prefill"}, ns)
    assert watch_pods(kube_cluster, ns, relisted) == [("MODIFIED", "prefill")]
