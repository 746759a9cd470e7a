"""A lost cluster loses no work (issue 46), on two real API servers, each with its agent: a
gang of a pool on both is chosen one cluster; that cluster's agent dies before the gang's pod
ran; once its lease ends the gang is dispatched to the other cluster at once; when the agent
returns, it first deletes the moved gang's objects, and its reports about them change
nothing. The test plays KAI and the kubelet, as the rest of this tier does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduler.backends import services as backend_services
from scheduler.models import AgentWork, Backend, Node
from tests import factories
from tests.k8s.conftest import spec, statuses, submit
from workflows.models import Task, WorkflowGroup

from .agent import install_agent_rbac, wait_until
from .conftest import Cluster
from .test_agent import agent_of

pytestmark = pytest.mark.timeout(240)
LEASE = 8  # the agents beat every 5 s


@override_settings(OSMO_BACKEND_LEASE=LEASE)
def test_a_dead_agents_waiting_gang_runs_on_the_other_cluster_and_is_fenced_there(
        apiserver, west_apiserver, k8s_settings, namespace, transactional_db, live_server,
        tmp_path, cluster, alice):
    west_apiserver.namespace(namespace)
    for server, name in ((apiserver, "east"), (west_apiserver, "west")):
        install_agent_rbac(server, namespace)
        backend_services.backend_upsert(name=name, kind="kubernetes", k8s_namespace=namespace)
    east = agent_of(apiserver, live_server, tmp_path, "east")
    west = agent_of(west_apiserver, live_server, tmp_path, "west")
    other = Cluster(west_apiserver, namespace)
    cluster.add_node("east-n1", gpus=8)
    other.add_node("west-n1", gpus=8)
    factories.pool("team", 64, backends=["east", "west"])
    try:
        east.start()
        west.start()
        wait_until(lambda: Node.objects.count() == 2, 30, "both mirrors", west)
        name = submit(alice, "team", spec("w", gpus=8))
        pod = f"{name}-g-t0"
        wait_until(lambda: cluster.names("pods") == [pod], 30, "east's pod (a tie: the "
                   "pool's order)", east)
        assert WorkflowGroup.objects.get().backend == "east"
        assert other.names("pods") == []

        east.kill()  # before its pod ran
        wait_until(lambda: other.names("pods") == [pod], LEASE + 30,
                   "the gang dispatched to west once east's lease ended", west)
        # Recovery: from the end of east's lease to the gang's pod on west (within one of
        # west's polls, which the fleet pass precedes).
        lease_end = Backend.objects.get(name="east").last_heartbeat + timedelta(seconds=LEASE)
        recovery = (timezone.now() - lease_end).total_seconds()
        print(f"recovery: the gang's pod on west {recovery:.1f} s after east's lease ended")
        assert recovery < 15  # one poll of west (10 s long-poll) and its creates
        assert WorkflowGroup.objects.get().backend == "west"
        assert cluster.names("pods") == [pod]  # east's API server still holds the old one

        east.start()  # it returns: the fence first
        wait_until(lambda: cluster.names("pods") == [] and cluster.names("podgroups") == [],
                   30, "the moved gang's objects deleted from east", east)
        wait_until(lambda: not AgentWork.objects.filter(backend="east", kind="delete",
                                                        acked_at__isnull=True).exists(),
                   30, "the fence acked (with the agent's next poll)", east)
        other.run(pod, "west-n1")
        wait_until(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING"]), 30,
                   "RUNNING on west", west)
        assert list(Task.objects.values_list("node_name", flat=True)) == ["west-n1"]
        assert other.names("pods") == [pod] and cluster.names("pods") == []
    finally:
        east.stop()
        west.stop()
        west_apiserver.request("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                               query=[("gracePeriodSeconds", "0")])
        other.delete_node("west-n1")
