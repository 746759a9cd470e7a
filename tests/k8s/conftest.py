"""Fixtures: an API emulator on loopback, the real ``kubernetes`` client pointed at it, and the
backend's parts driven one step at a time (the runner test drives them on their own)."""

from __future__ import annotations

import pytest

from scheduler.backends.kubernetes.cleanup import Cleaner
from scheduler.backends.kubernetes.client import Kube
from scheduler.backends.kubernetes.dispatch import Dispatcher
from scheduler.backends.kubernetes.listener import PodListener
from tests import factories
from tests.conftest import make_client

from .emulator import KubeCluster


@pytest.fixture
def cluster():
    emulator = KubeCluster().start()
    yield emulator
    emulator.stop()


@pytest.fixture
def k8s_settings(settings):
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    settings.OSMO_KAI_SYNC = False  # the dispatcher syncs a missing queue itself
    settings.OSMO_NAMESPACE = "osmo"
    settings.OSMO_SCHEDULER_NAME = "kai-scheduler"
    return settings


class Backend:
    """The backend's parts over one client, stepped by the test (the real-API-server tier
    steps the same parts, with its own watch timeout)."""

    def __init__(self, kube: Kube, *, watch_timeout: int = 5):
        self.kube = kube
        self.dispatcher = Dispatcher(kube, base_delay=0.0)
        self.listener = PodListener(kube, watch_timeout=watch_timeout)
        self.cleaner = Cleaner(kube)

    def dispatch(self):
        return self.dispatcher.run_once()

    def listen(self) -> int:
        """Apply what the cluster reports: a LIST the first time, then one WATCH."""
        return self.listener.step()

    def cleanup(self) -> int:
        return self.cleaner.run_once()


@pytest.fixture
def backend(cluster, k8s_settings, db):
    kube = Kube(cluster.api_client())
    yield Backend(kube)
    kube.close()


@pytest.fixture
def alice(db):
    return make_client("alice", "osmo-team-user")


@pytest.fixture
def admin(db):
    return make_client("root", "osmo-admin")


@pytest.fixture
def team(db):
    return factories.pool("team", 64)


def spec(name: str = "train", *, gpus: int = 2, tasks: int = 1, command: str = "[train]",
         extra: str = "") -> str:
    lines = "\n".join(
        f"    - {{name: t{i}, image: nvcr.io/x:1, command: {command}, resource: r"
        f"{', lead: true' if i == 0 else ''}}}" for i in range(tasks))
    return f"""
workflow:
  name: {name}
  groups:
  - name: g
    tasks:
{lines}
{extra}  resources:
    r: {{gpu: {gpus}, cpu: 2, memory: 8Gi}}
"""


def submit(client, pool: str, text: str, priority: str = "NORMAL") -> str:
    response = client.post(f"/api/pool/{pool}/workflow?priority={priority}", {"file": text},
                           format="json")
    assert response.status_code == 201, response.json()
    return response.json()["name"]


def workflow(client, name: str) -> dict:
    return client.get(f"/api/workflow/{name}").json()


def statuses(client, name: str) -> tuple[str, list[str]]:
    body = workflow(client, name)
    return body["status"], [t["status"] for g in body["groups"] for t in g["tasks"]]


def strip_server_fields(obj: dict) -> dict:
    """What we sent: without the fields the API server adds."""
    out = {k: v for k, v in obj.items() if k != "status" or obj.get("kind") == "Status"}
    out["metadata"] = {k: v for k, v in obj["metadata"].items()
                       if k not in ("resourceVersion", "uid", "creationTimestamp")}
    return out
