"""A real Kubernetes API server for the end-to-end tests, without a kubelet (envtest style).

KubeCluster starts etcd (a fresh data dir, no fsync) and kube-apiserver (token auth with one
admin token in system:masters, RBAC, service-account keys made by openssl, a self-signed
serving certificate in its own cert dir) on free loopback ports, waits for /readyz, writes a
kubeconfig, and installs the InferencePool CRD as its Go module ships it. No kubelet, scheduler
or controller-manager runs: tests create pods and set their status themselves (set_pod_status),
and a deleted namespace stays Terminating, so each KubeCluster has its own etcd.

The binaries and CRD files come from scripts/setup_kube.sh (.cache/tools/<tool>-<version>/,
versions in scripts/kube_tools.env); missing_tools() names those that are absent.
"""
import json
import os
import pathlib
import secrets
import signal
import subprocess
import time

import requests

from conftest import REPO, wait_until
from peer_servers import free_port

TOOLS = REPO / ".cache" / "tools"


def _tool_versions():
    versions = {}
    for line in (REPO / "scripts" / "kube_tools.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip()
    return versions


_VERSIONS = _tool_versions()
KUBE_DIR = TOOLS / f"kubernetes-{_VERSIONS['KUBE_VERSION']}"
KUBE_APISERVER = KUBE_DIR / "kube-apiserver"
ETCD = TOOLS / f"etcd-{_VERSIONS['ETCD_VERSION']}" / "etcd"
KUBECTL_LAYER_DIR = TOOLS / f"kubectl-layer-{_VERSIONS['KUBECTL_LAYER_VERSION']}"
KUBECTL = KUBECTL_LAYER_DIR / "kubectl"
HELM = KUBECTL_LAYER_DIR / "helm"
INFERENCE_POOL_CRD = (
    TOOLS / f"gateway-api-inference-extension-{_VERSIONS['INFERENCE_EXT_VERSION']}"
    / "inference.networking.k8s.io_inferencepools.yaml")
HTTP_ROUTE_CRD = (TOOLS / f"gateway-api-{_VERSIONS['GATEWAY_API_VERSION']}"
                  / "gateway.networking.k8s.io_httproutes.yaml")
INFERENCE_POOL_CRD_NAME = "inferencepools.inference.networking.k8s.io"


# What a KubeCluster needs; the Helm tests need HELM and HTTP_ROUTE_CRD besides.
CLUSTER_TOOLS = (KUBE_APISERVER, KUBECTL, ETCD, INFERENCE_POOL_CRD)


def missing_tools(paths=CLUSTER_TOOLS):
    """Those of `paths` (made by scripts/setup_kube.sh) that are not there."""
    return [str(p) for p in paths if not p.exists()]


def _stop_process(proc, grace_s=5):
    """SIGTERM, then SIGKILL after grace_s: kube-apiserver can hang for a minute on SIGTERM
    while holding its port."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _log_tail(path, lines=30):
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class KubeCluster:
    """etcd + kube-apiserver under `workdir` (a fresh, empty directory).

    Attributes: url (https://127.0.0.1:PORT), token (the admin bearer token), ca_file (the
    certificate that verifies the server), kubeconfig (path of a kubeconfig with those three).
    Methods raise with the command's stderr, or the server's log tail, when something fails.
    """

    def __init__(self, workdir, start_timeout=60):
        self.workdir = pathlib.Path(workdir)
        self.start_timeout = start_timeout
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.cert_dir = self.workdir / "certs"
        self.ca_file = str(self.cert_dir / "apiserver.crt")
        self.kubeconfig = str(self.workdir / "kubeconfig")
        self._etcd = None
        self._apiserver = None
        self._apiserver_starts = 0
        try:
            self._start_etcd()
            self._write_credentials()
            self._start_apiserver()
            self._write_kubeconfig()
            self.kubectl("apply", "--server-side", "-f", str(INFERENCE_POOL_CRD))
            self.wait_crd_established(INFERENCE_POOL_CRD_NAME)
        except BaseException:
            self.stop()
            raise

    # --- processes -------------------------------------------------------------------------

    def _start_etcd(self):
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._etcd_log = self.workdir / "etcd.log"
        with open(self._etcd_log, "w") as log:
            self._etcd = subprocess.Popen(
                [str(ETCD), "--data-dir", str(self.workdir / "etcd"), "--name", "default",
                 "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", f"default={peer_url}", "--unsafe-no-fsync",
                 "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
        self._wait(lambda: requests.get(f"{self.etcd_url}/health", timeout=5).json()["health"]
                   == "true", self._etcd, self._etcd_log, "etcd /health")

    def _write_credentials(self):
        self.cert_dir.mkdir()
        self._sa_key = self.workdir / "sa.key"
        self._sa_pub = self.workdir / "sa.pub"
        for argv in (["openssl", "genrsa", "-out", str(self._sa_key), "2048"],
                     ["openssl", "rsa", "-in", str(self._sa_key), "-pubout", "-out",
                      str(self._sa_pub)]):
            subprocess.run(argv, check=True, capture_output=True)
        self._tokens = self.workdir / "tokens.csv"
        self._tokens.write_text(f"{self.token},admin,1,system:masters\n")

    def _start_apiserver(self):
        self._apiserver_starts += 1
        self._apiserver_log = self.workdir / f"kube-apiserver.{self._apiserver_starts}.log"
        with open(self._apiserver_log, "w") as log:
            self._apiserver = subprocess.Popen(
                [str(KUBE_APISERVER), f"--etcd-servers={self.etcd_url}",
                 "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                 f"--secure-port={self.port}", f"--cert-dir={self.cert_dir}",
                 "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
                 f"--service-account-issuer={self.url}",
                 f"--service-account-key-file={self._sa_pub}",
                 f"--service-account-signing-key-file={self._sa_key}",
                 "--authorization-mode=RBAC", f"--token-auth-file={self._tokens}",
                 "--disable-admission-plugins=ServiceAccount"],
                stdout=log, stderr=subprocess.STDOUT)
        self._wait(self._apiserver_ready, self._apiserver, self._apiserver_log,
                   "kube-apiserver /readyz")

    def _apiserver_ready(self):
        if not os.path.exists(self.ca_file):
            return False
        response = requests.get(f"{self.url}/readyz", verify=self.ca_file, timeout=5,
                                headers={"Authorization": f"Bearer {self.token}"})
        return response.status_code == 200 and response.text == "ok"

    def _wait(self, check, proc, log, what):
        deadline = time.monotonic() + self.start_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: exited {proc.returncode}:\n{_log_tail(log)}")
            try:
                if check():
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not ready after {self.start_timeout} s:\n"
                                   f"{_log_tail(log)}")
            time.sleep(0.1)

    def _write_kubeconfig(self):
        pathlib.Path(self.kubeconfig).write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url,
                                                      "certificate-authority": self.ca_file}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        }, indent=1))

    def restart_apiserver(self):
        """Stops kube-apiserver (SIGKILL if SIGTERM takes over 5 s) and starts it again on the
        same port, etcd, certificate and token, so clients reconnect and watch on (a watch from
        a resource version of before may be answered 410 Expired: then they list again)."""
        _stop_process(self._apiserver)
        self._start_apiserver()

    def stop(self):
        for proc in (self._apiserver, self._etcd):
            if proc is not None:
                _stop_process(proc)

    # --- kubectl ---------------------------------------------------------------------------

    def kubectl(self, *args, input=None, timeout=60):
        """Runs kubectl against this cluster; returns its stdout. Raises with its stderr when
        it exits non-zero."""
        proc = subprocess.run(
            [str(KUBECTL), f"--kubeconfig={self.kubeconfig}",
             f"--cache-dir={self.workdir / 'kubectl-cache'}", *map(str, args)],
            input=input, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(map(str, args))} exited {proc.returncode}: "
                               f"{proc.stderr}")
        return proc.stdout

    def get_json(self, *args):
        """`kubectl get ARGS -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def apply(self, yaml_text, namespace=None):
        """Applies the objects in `yaml_text` server-side (into `namespace` when given: the
        namespace of the objects that name none)."""
        args = ["-n", namespace] if namespace else []
        return self.kubectl("apply", "--server-side", *args, "-f", "-", input=yaml_text)

    def wait_crd_established(self, name, timeout_s=30):
        """Waits until the CRD `name` is Established: its kind can be created. (Not `kubectl
        wait`, which fails at once while the CRD has no conditions yet.)"""
        def established():
            conditions = self.get_json("crd", name).get("status", {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_until(established, f"the CRD {name} to be Established", timeout=timeout_s,
                   interval=0.05)

    def create_namespace(self, name):
        self.kubectl("create", "namespace", name)

    # --- pods (no kubelet: the test plays its part) ----------------------------------------

    def create_pod(self, name, labels, namespace="default"):
        """Creates a pod with `labels` (a dict). It stays Pending with no IP until
        set_pod_status says otherwise."""
        self.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "engine", "image": "switchyard:test"}]},
        }))

    def set_pod_status(self, name, ip, ready=True, phase="Running", namespace="default"):
        """Sets the pod's phase, IP and Ready condition through the status subresource, as a
        kubelet would."""
        status = {
            "phase": phase,
            "podIP": ip,
            "podIPs": [{"ip": ip}] if ip else None,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
        self.kubectl("patch", "pod", name, "-n", namespace, "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": status}))

    def label_pod(self, name, labels, namespace="default"):
        """Sets the labels in `labels`; a value of None removes that label."""
        args = [f"{k}-" if v is None else f"{k}={v}" for k, v in labels.items()]
        self.kubectl("label", "pod", name, "-n", namespace, "--overwrite", *args)

    def delete_pod(self, name, namespace="default"):
        """Deletes the pod at once (no kubelet would confirm a graceful deletion)."""
        self.kubectl("delete", "pod", name, "-n", namespace, "--grace-period=0", "--force",
                     "--wait=false")
