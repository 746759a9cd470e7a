"""Our placement (``placement: osmo``) in the backend agent, on a real API server: the agent,
its own process with the shipped RBAC, binds a gang's pods itself (no scheduler beside it, no
KAI played by the test), the kubelet stand-in runs them, and the agent's cycles are the
backend's cycle record (``GET /api/scheduler/status?backend=``). (That an agent which does not
lead runs no cycle: ``tests/unit/test_placement_loop.py``.)"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from scheduler.backends import services as backend_services
from scheduler.models import SchedulerCycle
from tests import factories
from tests.k8s.conftest import spec, statuses, submit

from .agent import install_agent_rbac, wait_until
from .osmo_placement import SCHEDULER, delete_all_nodes, install_rbac, uninstall_cluster_rbac
from .test_agent import agent_of, east_nodes

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def east_osmo(apiserver, k8s_settings, namespace, transactional_db, kubelet):
    install_agent_rbac(apiserver, namespace)
    install_rbac(apiserver, namespace)  # bound to the agent's ServiceAccount as well
    delete_all_nodes(apiserver)  # nodes are cluster-wide: this test's cluster starts empty
    backend_services.backend_upsert(name="east", kind="kubernetes", k8s_namespace=namespace,
                                    placement="osmo", scheduler_name=SCHEDULER)
    yield
    delete_all_nodes(apiserver)
    uninstall_cluster_rbac(apiserver)


def pods(cluster) -> dict[str, tuple[str, str]]:
    """name → (node, schedulerName) of the namespace's pods."""
    body = cluster.server.request("GET", cluster._path("pods"))
    return {pod["metadata"]["name"]: (pod["spec"].get("nodeName", ""),
                                      pod["spec"].get("schedulerName", ""))
            for pod in body["items"]}


def counts(metric: str, **labels) -> float:
    return REGISTRY.get_sample_value(metric, labels) or 0.0


def test_the_agent_places_a_gang_itself_and_its_cycles_are_the_backends_record(
        east_osmo, apiserver, live_server, tmp_path, cluster, alice, kubelet):
    agent = agent_of(apiserver, live_server, tmp_path, "east")
    series = [("osmo_scheduler_pods_bound_total", {}),
              ("osmo_scheduler_time_to_first_bind_seconds_count", {"priority": "NORMAL"}),
              ("osmo_scheduler_cycles_total", {"result": "success"})]
    before = [counts(name, **labels) for name, labels in series]

    def recorded() -> list[float]:
        return [counts(name, **labels) - was
                for (name, labels), was in zip(series, before, strict=True)]

    cluster.add_node("east-n1", gpus=8)
    factories.pool("team", 512, backends=["east"])
    try:
        agent.start()
        wait_until(lambda: east_nodes() == ["east-n1"], 30, "the node mirrored", agent)
        placed = submit(alice, "team", spec("placed", gpus=2, tasks=3))
        wait_until(lambda: statuses(alice, placed) == ("RUNNING", ["RUNNING"] * 3), 60,
                   "the gang running", agent)
        assert pods(cluster) == {f"{placed}-g-t{i}": ("east-n1", SCHEDULER) for i in range(3)}
        # The agent's cycles feed the scheduler's series in the service (the live server).
        wait_until(lambda: recorded()[:2] == [3, 1], 30, "the agent's cycles recorded", agent)
        assert recorded()[2] >= 1

        # 2 GPUs are left: an 8-GPU gang waits in the cluster, with the agent's reason.
        waiting = submit(alice, "team", spec("waiting", gpus=8, tasks=1))
        wait_until(lambda: f"{waiting}-g-t0" in pods(cluster), 30, "the waiting pod", agent)

        def pending() -> list[str]:
            row = SchedulerCycle.objects.filter(backend="east").first()
            return [gang["podgroup"] for gang in row.pending_gangs] if row else []

        wait_until(lambda: pending() == [f"{waiting}-g"], 30, "the cycle record", agent)
        assert pods(cluster)[f"{waiting}-g-t0"] == ("", SCHEDULER)
        status = alice.get("/api/scheduler/status?backend=east").json()
        assert status["last_cycle"]["metrics"]["bound_total"] == 3
        assert [gang["podgroup"] for gang in status["pending"]] == [f"{waiting}-g"]
        assert status["pending"][0]["reasons"] != []
    finally:
        agent.stop()
