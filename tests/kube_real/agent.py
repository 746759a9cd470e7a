"""The backend agent against a real API server: its RBAC from ``deploy/kubernetes/agent``
installed as an operator installs it, a token of its ServiceAccount from the TokenRequest API
(as a pod's projected token), and the agent run as its own process — without the service's
database settings in its environment — and stopped or killed by its PID."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .server import DEPLOY, ApiServer, _kubeconfig, load_documents

AGENT_MANIFEST = DEPLOY / "agent" / "agent.yaml"
AGENT_NAMESPACE = "osmo"
AGENT_ACCOUNT = "osmo-agent"
AGENT_USER = f"system:serviceaccount:{AGENT_NAMESPACE}:{AGENT_ACCOUNT}"
SERVICE_ONLY = ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "OSMO_DATA_DIR",
                "CELERY_BROKER_URL")


def agent_documents() -> list[dict]:
    return load_documents(AGENT_MANIFEST)


def install_agent_rbac(server: ApiServer, namespace: str) -> None:
    """The agent's ServiceAccount and cluster-wide rules (once per server), and its
    namespaced Role bound in ``namespace`` (the backend's namespace in this test)."""
    for doc in agent_documents():
        if doc["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            server.create(doc, exist_ok=True)
        elif doc["kind"] in ("Role", "RoleBinding"):
            doc = copy.deepcopy(doc)
            doc["metadata"]["namespace"] = namespace
            server.create(doc, exist_ok=True)


def agent_kubeconfig(server: ApiServer, path: Path) -> Path:
    """A kubeconfig holding a token of the agent's ServiceAccount (TokenRequest)."""
    answer = server.request(
        "POST", f"/api/v1/namespaces/{AGENT_NAMESPACE}/serviceaccounts/{AGENT_ACCOUNT}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": 3600}})
    ca = yaml.safe_load(server.kubeconfig.read_text())["clusters"][0]["cluster"][
        "certificate-authority"]
    path.write_text(_kubeconfig(server.server, ca, answer["status"]["token"]))
    return path


class AgentProcess:
    """``python -m scheduler.backends.agent.process`` (what ``osmo backend-agent`` runs).
    Each start keeps ``identity``, as a container restarted in its pod keeps the pod's name
    (deploy/kubernetes/agent): it leads again at once, not after its old lease."""

    def __init__(self, *, url: str, token: str, name: str, kubeconfig: Path, log: Path,
                 identity: str | None = None):
        self.identity = identity or f"{name}-agent"
        self.argv = [sys.executable, "-m", "scheduler.backends.agent.process", "--url", url,
                     "--token", token, "--name", name, "--kubeconfig", str(kubeconfig),
                     "--identity", self.identity]
        self.log = log
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> AgentProcess:
        env = {k: v for k, v in os.environ.items() if k not in SERVICE_ONLY}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.argv, env=env, stdout=log, stderr=log,
                                            start_new_session=True)
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL: no goodbye, nothing flushed."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait(self, timeout: float = 30) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def wait_until(predicate, timeout: float, what: str, agent: AgentProcess | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    tail = f"\nagent log:\n{agent.log_tail()}" if agent else ""
    raise AssertionError(f"timed out waiting for {what}{tail}")


# --- many restarts: agents forked from a process that imported the agent once ---------------

class ForkedAgents:
    """Agents started in a few milliseconds each: ``agent_forker.py`` (started without the
    service's settings in its environment) imports the agent once and forks one per request,
    answering its PID; each is killed with SIGKILL by that PID."""

    def __init__(self, agent: AgentProcess):
        env = {k: v for k, v in os.environ.items() if k not in SERVICE_ONLY}
        self.forker = subprocess.Popen(
            [sys.executable, "-m", "tests.kube_real.agent_forker", str(agent.log),
             *agent.argv[3:]], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            cwd=str(Path(__file__).resolve().parents[2]), text=True, bufsize=1)
        assert self.forker.stdout.readline().strip() == "ready"
        self.current: int | None = None
        self.starts = 0

    def start(self) -> None:
        self.forker.stdin.write("start\n")
        self.current = int(self.forker.stdout.readline())
        self.starts += 1

    def kill(self) -> None:
        if self.current is not None:
            try:
                os.kill(self.current, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended by itself (the forker reaps it)
            self.current = None

    def close(self) -> None:
        self.kill()
        self.forker.stdin.close()
        self.forker.wait(timeout=10)
