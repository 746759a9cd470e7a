"""The real KAI Scheduler (v0.17.0, scheduler + binder) of ``../shared/tools/kai`` against the
tier's API server: what it needs there first (its CRDs, its namespaces, a ``kube-root-ca.crt``
ConfigMap beside each namespace's ``default`` ServiceAccount), then both processes, as the
admin (the controllers that would make these objects do not run here). Stopped by PID.

The scheduler decides and writes ``BindRequest`` objects; the binder posts the bindings; the
kubelet stand-in (``kubelet.py``) starts the bound pods.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import yaml

from osmo.embedded import free_port

from .server import CRDS, SHARED, ApiServer, KubeError, load_documents

TOOLS = SHARED / "tools" / "kai"
SCHEDULER_BINARY = TOOLS / "kai-scheduler-v0.17.0.gz"
BINDER_BINARY = TOOLS / "kai-binder-v0.17.0.gz"
SHARD_CRD = "kai.scheduler_schedulingshards.yaml"  # the tier installs the other four
KAI_NAMESPACES = ("kai-scheduler", "kai-resource-reservation")
ROOT_CA = "kube-root-ca.crt"


def unavailable_reason() -> str | None:
    for binary in (SCHEDULER_BINARY, BINDER_BINARY):
        if not binary.exists():
            return f"needs the KAI Scheduler binaries in {TOOLS} (../shared; CI has it)"
    return None


def prepare_namespace(apiserver: ApiServer, name: str) -> None:
    """What kube-controller-manager would give a namespace with pods: the root CA's
    ConfigMap (KAI marks a pod unschedulable without it, for its service-account volume).
    The ``default`` ServiceAccount is the tier's (``ApiServer.namespace``)."""
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    ca = Path(config["clusters"][0]["cluster"]["certificate-authority"]).read_text()
    apiserver.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": ROOT_CA, "namespace": name},
                      "data": {"ca.crt": ca}}, exist_ok=True)


class Kai:
    """Both KAI processes, their logs in ``run_dir``."""

    def __init__(self, apiserver: ApiServer, run_dir: Path):
        self.apiserver = apiserver
        self.run_dir = run_dir
        self.processes: dict[str, subprocess.Popen] = {}

    def _binary(self, packed: Path, name: str) -> Path:
        target = self.run_dir / name
        with gzip.open(packed, "rb") as source, target.open("wb") as out:
            shutil.copyfileobj(source, out)
        target.chmod(0o755)
        return target

    def install(self) -> None:
        for crd in load_documents(CRDS / SHARD_CRD):
            self.apiserver.create(crd, exist_ok=True)
        for name in KAI_NAMESPACES:
            self.apiserver.create({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": name}}, exist_ok=True)
            self.apiserver.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": "default", "namespace": name}},
                                  exist_ok=True)
            prepare_namespace(self.apiserver, name)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = (self.run_dir / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=log, env=env,
                                                start_new_session=True)
        log.close()

    def start(self) -> Kai:
        self.install()
        kubeconfig = str(self.apiserver.kubeconfig)
        env = {**os.environ, "KUBECONFIG": kubeconfig}
        scheduler = self._binary(SCHEDULER_BINARY, "kai-scheduler")
        binder = self._binary(BINDER_BINARY, "kai-binder")
        self._spawn("kai-scheduler", [
            str(scheduler), "--listen-address", f"127.0.0.1:{free_port()}",
            "--plugin-server-port", str(free_port()), "--profiler-port", str(free_port()),
            "--v", "3"], env)
        self._spawn("kai-binder", [
            str(binder), "--kubeconfig", kubeconfig,
            "--health-probe-bind-address", f"127.0.0.1:{free_port()}",
            "--metrics-bind-address", f"127.0.0.1:{free_port()}"], env)
        time.sleep(0.5)
        self.check()
        return self

    def check(self) -> None:
        """Fail when a process has ended (the test would otherwise only time out)."""
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}: "
                                   f"{self.log(name)[-3000:]}")

    def log(self, name: str) -> str:
        path = self.run_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def delete_quietly(apiserver: ApiServer, path: str) -> None:
    try:
        apiserver.request("DELETE", path)
    except KubeError as exc:
        if exc.status != 404:
            raise


def add_node(cluster, name: str, *, gpus: int, labels: dict[str, str] | None = None) -> None:
    """A Ready node KAI places on: admission's ``node.kubernetes.io/not-ready`` taint lifted,
    as the node lifecycle controller (not running here) would once the node is Ready."""
    cluster.add_node(name, gpus=gpus, labels=labels)
    cluster.server.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}},
                           content_type="application/merge-patch+json")
