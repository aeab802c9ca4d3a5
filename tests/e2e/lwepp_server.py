"""The Gateway API Inference Extension's lightweight endpoint picker (`lwepp`, built by
scripts/build_lwepp.sh into .cache/tools/lwepp-<version>/) as a side-by-side peer of the
router's ext_proc server: a real kube-apiserver (KubeCluster) holds an InferencePool whose
target ports are the given engines' ports, one ready pod per engine at 127.0.0.1 (its
`inference.networking.k8s.io/active-ports` annotation names its engine's port), and lwepp
watches them as it would in a cluster, serving ext_proc in plaintext on a free port.

lwepp logs every stream at Info; it runs at --zap-log-level=error so that what is measured is
its picking, not its logging.
"""
import json
import pathlib
import subprocess
import tempfile

import grpc

from conftest import wait_until
from kube_cluster import TOOLS, KubeCluster, _log_tail, _stop_process, _VERSIONS, missing_tools
from peer_servers import free_port

LWEPP = TOOLS / f"lwepp-{_VERSIONS['INFERENCE_EXT_VERSION']}" / "lwepp"
POOL = "lwepp-pool"


def lwepp_missing():
    """What is missing to run Lwepp (scripts/setup_kube.sh and scripts/build_lwepp.sh make
    them), as a list of paths."""
    return missing_tools() + ([str(LWEPP)] if not LWEPP.exists() else [])


class Lwepp:
    """lwepp picking among `ports` (engines on 127.0.0.1). Attributes: port (ext_proc),
    health_port, proc. `ready_check(port)` must return truthy once a pick names an engine."""

    def __init__(self, ports, ready_check, start_timeout=60):
        self.workdir = tempfile.TemporaryDirectory(prefix="sy-lwepp-")
        self.cluster = KubeCluster(self.workdir.name)
        self.proc = None
        try:
            self.cluster.apply(json.dumps({
                "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
                "metadata": {"name": POOL, "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "sim"}},
                         "targetPorts": [{"number": p} for p in ports],
                         "endpointPickerRef": {"name": "lwepp", "port": {"number": 9002}}},
            }))
            for i, port in enumerate(ports):
                name = f"engine-{i}"
                self.cluster.create_pod(name, {"app": "sim"})
                self.cluster.kubectl("annotate", "pod", name,
                                     f"inference.networking.k8s.io/active-ports={port}")
                self.cluster.set_pod_status(name, "127.0.0.1")
            self.port, self.health_port = free_port(), free_port()
            self._log = open(f"{self.workdir.name}/lwepp.log", "w")
            self.proc = subprocess.Popen(
                [str(LWEPP), f"--kubeconfig={self.cluster.kubeconfig}", f"--pool-name={POOL}",
                 "--pool-namespace=default", f"--grpc-port={self.port}",
                 f"--grpc-health-port={self.health_port}", f"--metrics-port={free_port()}",
                 "--secure-serving=false", "--zap-devel=false", "--zap-log-level=error"],
                stdout=self._log, stderr=subprocess.STDOUT)

            def ready():
                assert self.proc.poll() is None, self.log_tail()
                try:
                    return ready_check(self.port)
                except grpc.RpcError:
                    return False

            wait_until(ready, "lwepp to pick an engine", timeout=start_timeout, interval=0.2)
        except BaseException:
            self.stop()
            raise

    def log_tail(self):
        return _log_tail(pathlib.Path(self.workdir.name) / "lwepp.log")

    def stop(self):
        if self.proc is not None:
            _stop_process(self.proc)
            self._log.close()
        self.cluster.stop()
        self.workdir.cleanup()
