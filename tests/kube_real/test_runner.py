"""The backend process as it runs (leader election, listener thread with watches held open,
dispatch/cleanup loop, node inventory) against the real API server, through a stop and start
of the server: health says so, and everything converges afterwards."""

from __future__ import annotations

import threading
import time

import pytest

from scheduler.backends.kubernetes.client import api_client
from scheduler.backends.kubernetes.listener import PodListener
from scheduler.backends.kubernetes.runner import BackendRunner
from scheduler.models import Node
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, statuses, submit

from .conftest import wait_for


def run_backend(apiserver, *, interval: float, resync: float):
    """The backend process's runner in a thread, stopped at the end of the test."""
    backend = BackendRunner(
        interval=interval, resync=resync, watch_timeout=30, poll=0.1,
        client_factory=lambda: api_client(kubeconfig=str(apiserver.backend_kubeconfig)),
        backoff_start=0.1, backoff_max=0.5)
    thread = threading.Thread(target=backend.run, kwargs={"install_signals": False},
                              daemon=True)
    thread.start()
    yield backend
    backend.stop()
    thread.join(timeout=15)
    assert not thread.is_alive()


@pytest.fixture
def runner(apiserver, k8s_settings, transactional_db):
    yield from run_backend(apiserver, interval=0.2, resync=1.0)


def health(client) -> tuple[int, dict]:
    response = client.get("/api/health")
    return response.status_code, response.json()


def test_the_backend_process_runs_workflows_through_a_server_restart(
        runner, apiserver, cluster, client, broker_url) -> None:
    factories.pool("team", 64)
    alice = make_client("alice", "osmo-team-user")
    node = f"gpu-{cluster.namespace}"
    cluster.add_node(node, gpus=8, labels={"topology.osmo/rack": "r1"})
    try:
        wait_for(lambda: Node.objects.filter(name=node).exists(), what="node inventory")
        wait_for(lambda: health(client)[0] == 200, what="healthy")
        assert health(client)[1]["cluster"] == "ok"

        name = submit(alice, "team", spec("e2e", tasks=2))
        pods = [f"{name}-g-t0", f"{name}-g-t1"]
        wait_for(lambda: all(cluster.get("pods", p) for p in pods), what="pods")
        for pod in pods:
            cluster.run(pod, node)
        wait_for(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"]),
                 what="running")
        cluster.finish(pods[1])
        wait_for(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "COMPLETED"]),
                 what="one completed")

        apiserver.stop_apiserver()
        try:
            wait_for(lambda: health(client)[1].get("cluster") == "down", what="cluster down")
            assert health(client)[0] == 503
            later = submit(alice, "team", spec("during-outage"))
            time.sleep(0.5)
        finally:
            apiserver.start_apiserver()
        wait_for(lambda: cluster.get("pods", f"{later}-g-t0"), what="dispatch after the outage")
        wait_for(lambda: health(client)[1].get("cluster") == "ok", what="cluster ok again")
        cluster.finish(pods[0])  # the re-established watch (or a re-list) sees it
        wait_for(lambda: statuses(alice, name)[0] == "COMPLETED", what="completed")
        wait_for(lambda: not any(cluster.get("pods", p) for p in pods), what="cleanup")
        assert alice.post(f"/api/workflow/{later}/cancel").status_code == 200
        wait_for(lambda: cluster.names("pods") == [] and cluster.names("podgroups") == [],
                 what="cancel cleanup")
    finally:
        cluster.delete_node(node)


def test_a_start_lists_the_pods_once_and_the_resync_lists_them_again(
        apiserver, k8s_settings, transactional_db, cluster, client, broker_url,
        monkeypatch) -> None:
    """The listener's first LIST is the start's: the resync at the start does not ask for a
    second one (with thousands of pods, while the work begins); the next resync does."""
    lists: list[float] = []
    relist = PodListener.relist

    def counted(listener) -> int:
        lists.append(time.monotonic())
        return relist(listener)

    monkeypatch.setattr(PodListener, "relist", counted)
    node = f"gpu-{cluster.namespace}"
    cluster.add_node(node, gpus=8)
    try:
        backend = run_backend(apiserver, interval=0.2, resync=4.0)
        runner = next(backend)
        try:
            wait_for(lambda: runner.listener is not None and runner.listener.listed_at,
                     what="the first LIST")
            started = time.monotonic()
            wait_for(lambda: health(client)[0] == 200, what="a pass of the main loop")
            assert lists and runner.listener.relist_requested is False
            wait_for(lambda: runner.listener.relist_requested or len(lists) > 1, timeout=10,
                     what="the next resync's re-list")
            assert time.monotonic() - started >= 4.0 - 0.5
        finally:
            next(backend, None)
    finally:
        cluster.delete_node(node)
