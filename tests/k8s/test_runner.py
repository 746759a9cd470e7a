"""The backend as it runs: one leader-elected process (listener thread + dispatch loop) through
a kubeconfig, against the emulator with watches held open, broken, and an API outage; plus
`GET /api/health` and the command's guard.

Emulator on purpose: it cuts open watch streams mid-flight and answers 500 to everything for a
while, which a real API server cannot be made to do. The runner against the real server, with
a stop/start of the server, is tests/kube_real/test_runner.py."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduler.backends.kubernetes.client import api_client
from scheduler.backends.kubernetes.health import Health
from scheduler.backends.kubernetes.runner import BackendRunner
from scheduler.models import Node
from tests import factories
from tests.conftest import make_client

from .conftest import spec, statuses, submit


def wait_for(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def runner(transactional_db, cluster, k8s_settings, tmp_path):  # settings restored first
    kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig")
    cluster.watch_linger = None  # watches stay open as on a real API server
    backend = BackendRunner(interval=0.2, resync=1.0, watch_timeout=30, poll=0.1,
                            client_factory=lambda: api_client(kubeconfig=kubeconfig),
                            backoff_start=0.1, backoff_max=0.4)
    thread = threading.Thread(target=backend.run, kwargs={"install_signals": False},
                              daemon=True)
    thread.start()
    yield backend
    backend.stop()
    thread.join(timeout=15)
    assert not thread.is_alive()


def health(client) -> tuple[int, dict]:
    response = client.get("/api/health")
    body = response.json()
    assert set(body.pop("backends")) == {"default"}  # per backend: tests/test_health.py
    # What KAI placement lacks: tests/kube_real/test_kai_readiness.py on the real API server.
    # Reported with the cluster part only, and never as a degraded service.
    placement = body.pop("placement", None)
    assert (placement is not None) == ("cluster" in body)
    assert placement is None or set(placement) == {"ok", "missing"}
    return response.status_code, body


def test_the_backend_process_runs_workflows_through_breaks_and_outages(
        runner, cluster, client, broker_url) -> None:
    factories.pool("team", 64)
    alice = make_client("alice", "osmo-team-user")
    cluster.add_node("gpu-1", gpus=8, labels={"topology.osmo/rack": "r1"})
    wait_for(lambda: Node.objects.filter(name="gpu-1").exists(), what="node inventory")
    wait_for(lambda: health(client) == (200, {"status": "ok", "database": "ok",
                                              "broker": "ok", "cluster": "ok"}),
             what="healthy")

    name = submit(alice, "team", spec("e2e", tasks=2))
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    wait_for(lambda: all(cluster.get("pods", p) for p in pods), what="pods")
    wait_for(lambda: cluster.open_watches == 1, what="an open watch")
    cluster.run(pods[0], "gpu-1")
    cluster.run(pods[1], "gpu-1")
    wait_for(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"]),
             what="running")

    # The watch breaks; meanwhile a pod finishes: the resumed watch delivers it.
    cluster.break_watches()
    cluster.finish(pods[1])
    wait_for(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "COMPLETED"]),
             what="the update made while the watch was broken")

    # The API server answers 500 to everything for a while: health says so, and work
    # submitted meanwhile is dispatched once it recovers.
    cluster.outage = 500
    cluster.break_watches()
    wait_for(lambda: health(client)[1].get("cluster") == "down", what="cluster down")
    assert health(client)[0] == 503
    later = submit(alice, "team", spec("during-outage"))
    time.sleep(0.5)
    assert cluster.get("pods", f"{later}-g-t0") is None
    cluster.outage = None
    wait_for(lambda: cluster.get("pods", f"{later}-g-t0"), what="dispatch after the outage")
    # The listener says ok when a watch step returns: at the latest when its watch times out
    # (30 s here), if the watch reconnected after the last pod event.
    wait_for(lambda: health(client)[1].get("cluster") == "ok", timeout=45,
             what="cluster ok again")

    # Finish and cancel: the objects leave the cluster (cancel wakes the leader at once).
    cluster.finish(pods[0])
    wait_for(lambda: statuses(alice, name)[0] == "COMPLETED", what="completed")
    wait_for(lambda: not any(cluster.get("pods", p) for p in pods), what="cleanup")
    assert alice.post(f"/api/workflow/{later}/cancel").status_code == 200
    wait_for(lambda: cluster.names("pods") == [] and cluster.names("podgroups") == [],
             what="cancel cleanup")


def test_a_second_instance_waits_for_the_leader(runner, cluster, k8s_settings,
                                                tmp_path) -> None:
    wait_for(lambda: runner._leading.is_set(), what="leadership")
    second = BackendRunner(poll=0.05, client_factory=cluster.api_client)
    thread = threading.Thread(target=second.leader.acquire, args=(lambda: second.stopping,),
                              daemon=True)
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive()  # still waiting: one leader at a time
    second.stop()
    thread.join(timeout=5)
    assert not thread.is_alive()
    second.leader.release()


@pytest.mark.django_db
def test_health_reports_the_cluster_only_on_the_kubernetes_backend(client, broker_url,
                                                                   k8s_settings) -> None:
    status, body = health(client)
    assert (status, body) == (503, {"status": "degraded", "database": "ok", "broker": "ok",
                                    "cluster": "down"})  # no backend leader has reported
    reporter = Health()
    reporter.report("api", True)
    reporter.write(time.monotonic())
    assert health(client) == (200, {"status": "ok", "database": "ok", "broker": "ok",
                                    "cluster": "ok"})
    reporter.report("listener", False, "503 Service Unavailable")
    reporter.write(time.monotonic())
    assert health(client)[1]["cluster"] == "down"
    k8s_settings.OSMO_CLUSTER_BACKEND = "embedded"
    assert health(client) == (200, {"status": "ok", "database": "ok", "broker": "ok"})


@pytest.mark.django_db
def test_the_command_refuses_the_embedded_backend(settings) -> None:
    settings.OSMO_CLUSTER_BACKEND = "embedded"
    with pytest.raises(CommandError, match="is not a Kubernetes one"):
        call_command("run_k8s_backend")
