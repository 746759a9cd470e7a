"""Two agents for one backend (issue 46, "Agent failover"): the service leases the backend to
one agent instance; the other is refused (409 `agent_not_leader`, nothing changed) until the
leader's lease ends; a deposed leader is refused too, and its unacked work goes to the new
leader."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import AgentLease, AgentMessage, AgentWork, Backend, GroupDispatch, Node
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, submit
from workflows.models import WorkflowGroup

from .test_agent_api import UID, node

pytestmark = pytest.mark.django_db

LEASE = 12  # OSMO_AGENT_LEASE's default


@pytest.fixture
def east(admin_client):
    response = admin_client.post("/api/configs/backend/east", {"kind": "kubernetes",
                                                               "k8s_namespace": "east"},
                                 format="json")
    assert response.status_code == 201
    factories.pool("team", 64, backends=["east"])
    return Backend.objects.get(name="east")


@pytest.fixture
def agent(east):
    return make_client("agent-east", "osmo-backend-east")


def register(agent, instance: str):
    return agent.post("/api/configs/backend/east/agent/register",
                      {"k8s_uid": UID, "version": "v1.25.0", "instance": instance},
                      format="json")


def poll(agent, instance: str, acks=()):
    return agent.post("/api/configs/backend/east/agent/work",
                      {"acks": list(acks), "wait": 0, "instance": instance}, format="json")


def send(agent, instance: str, message_id: str):
    return agent.post("/api/configs/backend/east/agent/messages", {
        "messages": [{"id": message_id, "type": "nodes", "payload": {"nodes": [
            node("east-n1", 8)]}}], "instance": instance}, format="json")


def lease_ends():
    """As if OSMO_AGENT_LEASE passed since the holder's last request."""
    AgentLease.objects.filter(backend="east").update(
        acquired_at=timezone.now() - timedelta(seconds=LEASE + 1),
        renewed_at=timezone.now() - timedelta(seconds=LEASE + 1))


def state() -> dict:
    return {"backend": Backend.objects.filter(name="east").values().get(),
            "lease": AgentLease.objects.filter(backend="east").values().get(),
            "work": list(AgentWork.objects.values()),
            "dispatch": list(GroupDispatch.objects.values()),
            "messages": AgentMessage.objects.count(),
            "nodes": list(Node.objects.values_list("name", flat=True))}


def refused(response) -> None:
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["code"] == "agent_not_leader"
    assert body["errors"] == {"instance": ["Not the backend's leader."]}
    assert body["detail"]


def test_the_first_agent_leads_and_the_other_is_refused_and_changes_nothing(agent):
    answer = register(agent, "agent-a")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["lease_seconds"] == LEASE
    lease = AgentLease.objects.get(backend="east")
    assert (lease.holder, lease.transitions) == ("agent-a", 0)
    alice = make_client("alice", "osmo-team-user")
    submit(alice, "team", spec("w", gpus=1))  # waiting: the next poll claims it
    Backend.objects.filter(name="east").update(
        last_heartbeat=timezone.now() - timedelta(seconds=5))
    before = state()
    assert before["dispatch"] == []

    refused(register(agent, "agent-b"))
    refused(poll(agent, "agent-b"))
    refused(send(agent, "agent-b", "b-1"))
    assert state() == before  # no claim, no work, no heartbeat, no node, no message
    assert "Another agent leads backend 'east'" in register(agent, "agent-b").json()["detail"]

    # The leader is heard as before: its poll claims the group.
    answer = poll(agent, "agent-a")
    assert answer.status_code == 200, answer.json()
    assert [w["kind"] for w in answer.json()["work"]] == ["sync", "create", "create"]
    assert send(agent, "agent-a", "a-1").json() == {"acked": ["a-1"]}


def test_the_lease_passes_to_the_standby_once_it_ends_with_the_unacked_work(agent):
    register(agent, "agent-a")
    alice = make_client("alice", "osmo-team-user")
    name = submit(alice, "team", spec("w", gpus=1))
    handed = poll(agent, "agent-a").json()["work"]  # handed out, never acked: a died
    creates = [w["id"] for w in handed if w["kind"] == "create"]
    assert len(creates) == 2
    refused(register(agent, "agent-b"))  # a's lease still runs

    lease_ends()
    answer = register(agent, "agent-b")
    assert answer.status_code == 200, answer.json()
    lease = AgentLease.objects.get(backend="east")
    assert (lease.holder, lease.transitions) == ("agent-b", 1)
    work = poll(agent, "agent-b").json()["work"]
    assert [w["id"] for w in work if w["kind"] == "create"] == creates  # handed out again
    assert GroupDispatch.objects.count() == 1  # claimed once, whoever holds the lease
    poll(agent, "agent-b", [{"id": w["id"]} for w in work])
    group = WorkflowGroup.objects.get(workflow__name=name)
    assert group.backend == "east"


def test_a_deposed_leader_is_refused_and_its_acks_and_reports_change_nothing(agent):
    register(agent, "agent-a")
    alice = make_client("alice", "osmo-team-user")
    submit(alice, "team", spec("w", gpus=1))
    handed = poll(agent, "agent-a").json()["work"]
    lease_ends()
    assert register(agent, "agent-b").status_code == 200
    before = state()

    # a comes back (its partition healed): it acks what it did, reports, registers.
    refused(poll(agent, "agent-a", [{"id": w["id"]} for w in handed]))
    refused(send(agent, "agent-a", "a-1"))
    refused(register(agent, "agent-a"))
    assert state() == before
    assert AgentWork.objects.filter(acked_at__isnull=True).count() == len(handed)


def test_a_leader_whose_lease_ended_is_heard_again_only_after_it_registers(agent):
    """Nobody took its lease, yet its ended lease is not renewed by a poll: it registers
    (and so re-lists) before it acts again."""
    register(agent, "agent-a")
    lease_ends()
    response = poll(agent, "agent-a")
    refused(response)
    assert "register again to lead" in response.json()["detail"]
    refused(send(agent, "agent-a", "a-1"))
    assert register(agent, "agent-a").status_code == 200
    assert AgentLease.objects.get(backend="east").transitions == 0  # the same holder
    assert poll(agent, "agent-a").status_code == 200


def test_the_backend_is_online_while_its_leader_holds_it(agent, admin_client):
    register(agent, "agent-a")
    assert admin_client.get("/api/configs/backend/east").json()["status"] == "ONLINE"
    Backend.objects.filter(name="east").update(
        last_heartbeat=timezone.now() - timedelta(seconds=60))
    refused(poll(agent, "agent-b"))  # a standby's call is no heartbeat
    assert admin_client.get("/api/configs/backend/east").json()["status"] == "OFFLINE"
    assert poll(agent, "agent-a").status_code == 200
    assert admin_client.get("/api/configs/backend/east").json()["status"] == "ONLINE"
