"""``OSMO_PLACEMENT=osmo`` in the backend process as it runs (leader election, informers,
cycle loop): a workflow submitted through the API is placed, bound, Running, its tasks RUNNING,
and ``GET /api/scheduler/status`` reports the cycles' figures; a gang that cannot fit is
explained through ``explain``."""

from __future__ import annotations

import threading

import pytest

from scheduler.backends.kubernetes.client import api_client
from scheduler.backends.kubernetes.runner import BackendRunner
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, statuses, submit

from .conftest import wait_for
from .kubelet import Kubelet
from .osmo_placement import (
    SCHEDULER,
    delete_all_nodes,
    install_rbac,
    uninstall_cluster_rbac,
)


@pytest.fixture(params=["thread", "process"])
def osmo_runner(request, apiserver, k8s_settings, namespace, transactional_db):
    k8s_settings.OSMO_PLACEMENT = "osmo"
    k8s_settings.OSMO_SCHEDULER_NAME = SCHEDULER
    install_rbac(apiserver, namespace)
    delete_all_nodes(apiserver)
    kubelet = Kubelet(apiserver, namespace).start()
    backend = BackendRunner(
        interval=0.2, resync=1.0, watch_timeout=30, poll=0.1,
        client_factory=lambda: api_client(kubeconfig=str(apiserver.backend_kubeconfig)),
        backoff_start=0.1, backoff_max=0.5, placement_process=request.param == "process",
        kubeconfig=str(apiserver.backend_kubeconfig))
    assert backend.placing
    thread = threading.Thread(target=backend.run, kwargs={"install_signals": False},
                              daemon=True)
    thread.start()
    yield backend
    backend.stop()
    thread.join(timeout=15)
    kubelet.stop()
    kubelet.check()
    assert not thread.is_alive()
    delete_all_nodes(apiserver)
    uninstall_cluster_rbac(apiserver)


def test_the_backend_process_schedules_with_osmo_placement(osmo_runner, cluster, apiserver,
                                                           namespace) -> None:
    factories.pool("team", 64)
    alice = make_client("alice", "osmo-team-user")
    admin = make_client("root", "osmo-admin")
    cluster.add_node(f"{namespace}-n1", gpus=8)
    name = submit(alice, "team", spec("placed", gpus=2, tasks=2))
    wait_for(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"]),
             timeout=30, what="tasks running")
    pods = [cluster.get("pods", f"{name}-g-t{i}") for i in range(2)]
    assert {p["spec"]["nodeName"] for p in pods} == {f"{namespace}-n1"}
    assert {p["spec"]["schedulerName"] for p in pods} == {SCHEDULER}

    big = submit(alice, "team", spec("too-big", gpus=8, tasks=2))
    wait_for(lambda: any(g["reasons"] and g["reasons"][0]["code"] == "insufficient_gpus"
                         for g in alice.get(f"/api/workflow/{big}/explain").json()["groups"]),
             timeout=30, what="explained")
    status = admin.get("/api/scheduler/status").json()
    metrics = status["last_cycle"]["metrics"]
    assert metrics["api_calls_total"]["bind"] == 2
    assert {"duration_ms", "snapshot_ms", "decide_ms", "apply_ms", "bound", "evicted",
            "api_calls", "cycles"} <= set(metrics)
    assert [p["podgroup"] for p in status["pending"]] == [f"{big}-g"]
    group = cluster.get("podgroups", f"{big}-g")
    assert group["status"]["schedulingConditions"][0]["reasons"][0]["reason"] == \
        "insufficient_gpus"
