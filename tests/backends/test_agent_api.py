"""The agent's endpoints (docs/CONTRACT-CHANGES.md "The backend agent"): identity, who may act
as which backend, messages applied once by id, work handed out until acked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from pools.models import Pool, PoolUsageSample
from scheduler.core.kai_names import TASK_NAME_ANNOTATION, WORKFLOW_NAME_ANNOTATION
from scheduler.models import AgentMessage, AgentWork, Backend, GroupDispatch, Node, SchedulerCycle
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, submit
from workflows import lifecycle
from workflows.models import Task, TaskEvent, TaskLogChunk, WorkflowGroup

pytestmark = pytest.mark.django_db

UID = "0b8f9e8e-1111-4a4a-9c9c-000000000001"


@pytest.fixture
def east(admin_client):
    response = admin_client.post("/api/configs/backend/east", {"kind": "kubernetes",
                                                               "k8s_namespace": "east"},
                                 format="json")
    assert response.status_code == 201
    return Backend.objects.get(name="east")


@pytest.fixture
def agent(east):
    return make_client("agent-east", "osmo-backend-east")


def register(client, name="east", uid=UID, version="v1.25.0"):
    return client.post(f"/api/configs/backend/{name}/agent/register",
                       {"k8s_uid": uid, "version": version}, format="json")


def row(name="east") -> dict:
    return Backend.objects.filter(name=name).values().get()


def node(name: str, gpus: int) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "8",
                                                   "memory": "64Gi"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def test_the_first_connect_records_the_cluster_and_a_heartbeat(agent, east):
    response = register(agent)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body == {"name": "east", "k8s_namespace": "east", "placement": "kai",
                    "scheduler_name": "kai-scheduler", "session": body["session"],
                    "lease_seconds": 12,
                    "scheduler": {"scheduler_name": "kai-scheduler", "interval": 1.0,
                                  "reserve_after_seconds": 10.0, "max_reservations": 4,
                                  "usage_k_value": 1.0}}
    backend = row()
    assert body["session"] == backend["last_heartbeat"].isoformat()
    assert (backend["k8s_uid"], backend["version"]) == (UID, "v1.25.0")
    assert backend["last_heartbeat"] is not None
    assert register(agent, version="v1.26.0").status_code == 200  # the same cluster again
    assert row()["version"] == "v1.26.0"


def test_another_cluster_under_a_taken_name_is_409_and_changes_nothing(agent, east):
    register(agent)
    before = row()
    response = register(agent, uid="another-cluster", version="v9")
    assert response.status_code == 409
    assert response.json()["code"] == "backend_identity_mismatch"
    assert row() == before


def test_a_token_of_backend_a_cannot_act_as_b(admin_client, east, agent):
    admin_client.post("/api/configs/backend/west", {"kind": "kubernetes"}, format="json")
    register(agent)
    west = make_client("agent-west", "osmo-backend-west")
    before = (row(), row("west"), AgentMessage.objects.count(), Node.objects.count())
    message = {"messages": [{"id": "m1", "type": "nodes", "payload": {"nodes": [node("n", 8)]}}]}
    for response in (register(west, "east", uid="x"),
                     west.post("/api/configs/backend/east/agent/messages", message,
                               format="json"),
                     west.post("/api/configs/backend/east/agent/work", {"wait": 0},
                               format="json")):
        assert response.status_code == 403, response.json()
        assert response.json()["code"] == "forbidden"
    assert (row(), row("west"), AgentMessage.objects.count(), Node.objects.count()) == before


@pytest.mark.parametrize("groups", [("osmo-team-user",), ("osmo-admin",), ()])
def test_ordinary_users_and_admins_are_not_agents(east, groups):
    client = make_client("someone", *groups)
    before = row()
    assert register(client).status_code == 403
    assert row() == before


def test_any_backend_group_serves_every_backend(east):
    assert register(make_client("fleet", "osmo-backend")).status_code == 200


def test_only_kubernetes_backends_have_agents(admin_client):
    client = make_client("fleet", "osmo-backend")
    response = register(client, "default")
    assert response.status_code == 400 and response.json()["code"] == "invalid_backend"
    assert register(client, "nowhere").status_code == 404


def test_messages_before_register_are_refused(agent):
    response = agent.post("/api/configs/backend/east/agent/messages",
                          {"messages": [{"id": "m1", "type": "heartbeat"}]}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "backend_not_registered"


def test_a_message_id_is_applied_once(agent):
    register(agent)

    def send(gpus):
        return agent.post("/api/configs/backend/east/agent/messages", {"messages": [
            {"id": "m1", "type": "nodes", "payload": {"nodes": [node("n1", gpus)]}}]},
            format="json")

    assert send(8).json() == {"acked": ["m1"]}
    # The same id again (a re-send after a lost answer) is acked and applied no more.
    assert send(16).json() == {"acked": ["m1"]}
    assert list(Node.objects.values_list("name", "gpus", "backend")) == [("n1", 8, "east")]
    assert AgentMessage.objects.filter(backend="east").count() == 1


def test_a_full_node_list_removes_the_nodes_gone(agent):
    register(agent)
    agent.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "a", "type": "nodes", "payload": {"nodes": [node("n1", 8), node("n2", 8)]}},
        {"id": "b", "type": "nodes_listed", "payload": {"names": ["n1"]}}]}, format="json")
    assert list(Node.objects.values_list("name", flat=True)) == ["n1"]


def test_a_nodes_message_upserts_writes_only_what_changed_and_deletes(agent):
    register(agent)

    def send(message_id, nodes, deleted=()):
        return agent.post("/api/configs/backend/east/agent/messages", {"messages": [
            {"id": message_id, "type": "nodes",
             "payload": {"nodes": nodes, "deleted": list(deleted)}}]}, format="json")

    send("a", [node(f"n{i}", 8) for i in range(3)])
    stamps = dict(Node.objects.values_list("name", "updated_at"))
    cordoned = {**node("n1", 8), "spec": {"unschedulable": True}}
    assert send("b", [node("n0", 8), cordoned, node("n2", 4)], deleted=["n0"]).json() == {
        "acked": ["b"]}
    assert list(Node.objects.values_list("name", "gpus", "schedulable", "backend")) == [
        ("n1", 8, False, "east"), ("n2", 4, True, "east")]
    after = dict(Node.objects.values_list("name", "updated_at"))
    assert after["n1"] > stamps["n1"] and after["n2"] > stamps["n2"]
    send("c", [node("n2", 4)])  # unchanged: not written
    assert Node.objects.get(name="n2").updated_at == after["n2"]


def test_the_agents_placement_report_is_the_backends_health(agent, client):
    register(agent)
    assert client.get("/api/health").json()["backends"]["east"]["placement"] == {
        "ok": None, "missing": []}
    missing = [{"requirement": "priorityclass", "detail": "PriorityClass osmo-low does not "
                                                          "exist"}]
    agent.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "p1", "type": "placement", "payload": {"missing": missing}}]}, format="json")
    assert client.get("/api/health").json()["backends"]["east"]["placement"] == {
        "ok": False, "missing": missing}
    agent.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "p2", "type": "placement", "payload": {"missing": []}}]}, format="json")
    assert client.get("/api/health").json()["backends"]["east"]["placement"] == {
        "ok": True, "missing": []}
    assert client.get("/api/health").json()["backends"]["default"]["placement"] == {
        "ok": True, "missing": []}  # the embedded default's: nothing to report


def cycle(**changes) -> dict:
    """A cycle of the agent's placement, as its ``publish_cycle`` sends one."""
    return {"at": 1_800_000_000.5, "duration_ms": 12.5, "bound": 3, "evicted": 1,
            "queues": [{"name": "osmo-pool-team", "parent": None, "deserved_gpus": 8,
                        "fair_share_gpus": 8, "allocated_gpus": 6,
                        "allocated_non_preemptible_gpus": 6, "requested_gpus": 10,
                        "reserved_gpus": 0}],
            "pending_gangs": [{"podgroup": "w-1-g", "workflow": "w-1", "group": "g",
                               "queue": "osmo-pool-team",
                               "reasons": [{"code": "no_fit", "message": "no node fits"}],
                               "estimate": None}],
            "metrics": {"cycles": 7, "bound_total": 20}, **changes}


def test_a_cycle_of_the_agents_placement_is_the_backends_cycle_record(agent):
    register(agent)

    def send(message_id: str, payload: dict):
        return agent.post("/api/configs/backend/east/agent/messages", {"messages": [
            {"id": message_id, "type": "cycle", "payload": payload}]}, format="json")

    assert send("c1", cycle()).json() == {"acked": ["c1"]}
    stored = SchedulerCycle.objects.filter(backend="east").values(
        "at", "duration_ms", "bound", "evicted", "pending", "queues", "pending_gangs",
        "metrics").get()
    assert stored == {"at": datetime.fromtimestamp(1_800_000_000.5, tz=UTC),
                      "duration_ms": 12.5, "bound": 3, "evicted": 1, "pending": 1,
                      "queues": cycle()["queues"], "pending_gangs": cycle()["pending_gangs"],
                      "metrics": {"cycles": 7, "bound_total": 20}}
    # A re-sent cycle changes nothing; a later one replaces the record.
    assert send("c1", cycle(bound=9)).json() == {"acked": ["c1"]}
    assert SchedulerCycle.objects.get(backend="east").bound == 3
    assert send("c2", cycle(bound=0, pending_gangs=[])).json() == {"acked": ["c2"]}
    assert SchedulerCycle.objects.filter(backend="east").values_list(
        "bound", "pending").get() == (0, 0)


@pytest.mark.parametrize("change, field", [
    ({"bound": -1}, "bound"),
    ({"queues": [{"name": "q"}]}, "queues"),
    ({"pending_gangs": [{"podgroup": "p", "workflow": "w", "group": "g", "queue": "q",
                         "reasons": [], "surprise": 1}]}, "pending_gangs"),
    ({"pending_gangs": [cycle()["pending_gangs"][0]] * 2001}, "pending_gangs"),
    ({"metrics": "fast"}, "metrics"),
])
def test_a_cycle_of_a_bad_shape_is_a_400_that_changes_nothing(agent, change, field):
    register(agent)
    response = agent.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "h1", "type": "heartbeat"},
        {"id": "c1", "type": "cycle", "payload": cycle(**change)}]}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert [key for key in body["errors"]
            if key.startswith(f"messages.1.payload.{field}")] != []
    assert not SchedulerCycle.objects.filter(backend="east").exists()
    assert AgentMessage.objects.count() == 0


def test_a_poll_carries_the_queues_usage_when_the_agent_asks(agent, east, settings):
    factories.pool("team", 0, backends=["east"])
    Node.objects.create(name="e1", gpus=8, backend="east")
    now = timezone.now()
    for age in (0, 3600):  # now and one half-life ago: the pool held the whole cluster
        PoolUsageSample.objects.create(pool=Pool.objects.get(name="team"),
                                       at=now - timedelta(seconds=age), used_gpus=8,
                                       low_gpus=0, quota_gpus=0)
    register(agent)

    def poll(**body):
        response = agent.post("/api/configs/backend/east/agent/work",
                              {"wait": 0, **body}, format="json")
        assert response.status_code == 200, response.json()
        return response.json()

    settings.OSMO_USAGE_HALF_LIFE = 3600
    assert "usage" not in poll()
    assert poll(usage=True)["usage"] == {"osmo-pool-east-team.shared": pytest.approx(1.0)}
    settings.OSMO_USAGE_HALF_LIFE = None
    assert poll(usage=True)["usage"] == {}


def test_a_batch_is_bounded(agent):
    register(agent)
    messages = [{"id": f"m{i}", "type": "heartbeat"} for i in range(501)]
    response = agent.post("/api/configs/backend/east/agent/messages", {"messages": messages},
                          format="json")
    assert response.status_code == 400
    assert AgentMessage.objects.count() == 0


def test_work_is_handed_out_until_acked_and_then_the_group_is_applied(agent, east):
    factories.pool("team", 256, backends=["east"])
    factories.pool("other", 64)  # on `default`: never this agent's
    alice = make_client("alice", "osmo-team-user", "osmo-other-user")
    name = submit(alice, "team", spec("big", gpus=1, tasks=250))
    submit(alice, "other", spec("elsewhere", gpus=1))
    register(agent)

    def poll(acks=()):
        response = agent.post("/api/configs/backend/east/agent/work",
                              {"acks": list(acks), "wait": 0}, format="json")
        assert response.status_code == 200, response.json()
        return response.json()["work"]

    work = poll()
    creates = [w for w in work if w["kind"] == "create"]
    assert [w["kind"] for w in work] == ["sync"] + ["create"] * 4
    kinds = [[o["kind"] for o in w["payload"]["objects"]] for w in creates]
    assert kinds[0] == ["Service", "PodGroup"] and kinds[1:] == [["Pod"] * 100,
                                                                 ["Pod"] * 100, ["Pod"] * 50]
    group = WorkflowGroup.objects.get(workflow__name=name)
    assert GroupDispatch.objects.get(group=group).namespace == "east"
    assert poll() == work  # nothing acked: the same again
    poll([{"id": w["id"]} for w in work[:3]])
    group.refresh_from_db()
    assert group.backend is None  # one create item of it is still unacked
    assert [w["id"] for w in poll()] == [work[3]["id"], work[4]["id"]]
    assert poll([{"id": w["id"]} for w in work[3:]]) == []
    group.refresh_from_db()
    assert group.backend == "east"
    assert GroupDispatch.objects.get(group=group).applied_at is not None
    assert AgentWork.objects.filter(acked_at__isnull=True).count() == 0


def test_a_long_poll_is_a_heartbeat_when_it_arrives_not_while_it_waits(agent, east):
    """A dead agent's long poll must not keep its backend ONLINE until the poll ends."""
    register(agent)
    work = agent.post("/api/configs/backend/east/agent/work", {"wait": 0},
                      format="json").json()["work"]
    agent.post("/api/configs/backend/east/agent/work",
               {"acks": [{"id": w["id"]} for w in work], "wait": 0}, format="json")
    arrived = timezone.now()
    response = agent.post("/api/configs/backend/east/agent/work", {"wait": 2}, format="json")
    ended = timezone.now()
    assert response.status_code == 200 and response.json()["work"] == []
    assert (ended - arrived).total_seconds() >= 1.9  # it waited
    beat = row()["last_heartbeat"]
    assert arrived <= beat and (beat - arrived).total_seconds() < 0.5, (arrived, beat, ended)


def test_an_agent_speaks_only_for_its_own_work_and_nodes(admin_client, agent, east):
    """The token of east reports a pod of a workflow dispatched to west, and a Node of
    west's: nothing of west's changes."""
    admin_client.post("/api/configs/backend/west", {"kind": "kubernetes"}, format="json")
    west = make_client("agent-west", "osmo-backend-west")
    register(agent)
    register(west, "west", uid="west-uid")
    factories.pool("lab", 64, backends=["west"])
    name = submit(make_client("bob", "osmo-lab-user"), "lab", spec("w", gpus=1))
    work = west.post("/api/configs/backend/west/agent/work", {"wait": 0},
                     format="json").json()["work"]
    west.post("/api/configs/backend/west/agent/work", {"acks": [{"id": w["id"]} for w in work],
                                                       "wait": 0}, format="json")
    west.post("/api/configs/backend/west/agent/messages", {"messages": [
        {"id": "n", "type": "nodes", "payload": {"nodes": [node("west-n1", 8)]}}]},
        format="json")
    before = (list(Task.objects.values()), list(Node.objects.values()))
    pod = {"metadata": {"name": f"{name}-g-t0", "annotations": {
        WORKFLOW_NAME_ANNOTATION: name, TASK_NAME_ANNOTATION: "t0"}},
        "spec": {"nodeName": "west-n1"}, "status": {"phase": "Running"}}
    response = agent.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "p", "type": "pods", "payload": {"pods": [[pod, False]]}},
        {"id": "n", "type": "nodes", "payload": {"nodes": [node("west-n1", 1)]}},
        {"id": "l", "type": "nodes_listed", "payload": {"names": []}},
        {"id": "r", "type": "pods_listed", "payload": {"tasks": [], "applied_through": 0}}]},
        format="json")
    assert response.json() == {"acked": ["p", "n", "l", "r"]}
    assert (list(Task.objects.values()), list(Node.objects.values())) == before
    # The same pod from west's own agent is applied.
    west.post("/api/configs/backend/west/agent/messages", {"messages": [
        {"id": "p", "type": "pods", "payload": {"pods": [[pod, False]]}}]}, format="json")
    assert Task.objects.get(workflow__name=name).status == "RUNNING"


def metric(client, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").content.decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def test_the_agents_traffic_is_counted_per_backend(agent, east, settings,
                                                   django_capture_on_commit_callbacks):
    settings.OSMO_METRICS = True
    admin = make_client("root", "osmo-admin")
    names = ("osmo_agent_connects_total", "osmo_agent_messages_total",
             "osmo_agent_messages_resent_total", "osmo_agent_dispatch_lag_seconds_count")
    labels = ({"backend": "east"}, {"backend": "east", "type": "nodes"}, {"backend": "east"},
              {"backend": "east"})
    before = [metric(admin, name, **label) for name, label in zip(names, labels, strict=True)]
    factories.pool("team", 64, backends=["east"])
    submit(make_client("alice", "osmo-team-user"), "team", spec("w", gpus=1))
    with django_capture_on_commit_callbacks(execute=True):  # counted once committed
        register(agent)
        register(agent)  # a reconnect
        batch = {"messages": [{"id": f"m{i}", "type": "nodes", "payload": {
            "nodes": [node(f"n{i}", 8)]}} for i in range(3)]}
        for _ in range(2):  # the second time: sent again, applied before
            assert agent.post("/api/configs/backend/east/agent/messages", batch,
                              format="json").status_code == 200
        work = agent.post("/api/configs/backend/east/agent/work", {"wait": 0},
                          format="json").json()["work"]
        agent.post("/api/configs/backend/east/agent/work",
                   {"acks": [{"id": w["id"]} for w in work], "wait": 0}, format="json")
    after = [metric(admin, name, **label) for name, label in zip(names, labels, strict=True)]
    assert [b - a for a, b in zip(before, after, strict=True)] == [2, 3, 3, 1]


RESCHEDULED = """
workflow:
  name: ft
  groups:
  - name: g
    tasks:
    - {name: lead, image: nvcr.io/x:1, command: [a], resource: r, lead: true,
       exitActions: {RESCHEDULE: "3"}}
    - {name: worker, image: nvcr.io/x:1, command: [b], resource: r}
  resources:
    r: {gpu: 1, cpu: 1, memory: 1Gi}
"""


def test_a_rescheduled_group_s_earlier_run_is_deleted_before_its_rerun_is_created(agent, east):
    factories.pool("team", 64, backends=["east"], max_retries=2)
    alice = make_client("alice", "osmo-team-user")
    name = submit(alice, "team", RESCHEDULED)
    register(agent)

    def poll(acks=()):
        response = agent.post("/api/configs/backend/east/agent/work",
                              {"acks": [{"id": i} for i in acks], "wait": 0}, format="json")
        assert response.status_code == 200, response.json()
        return response.json()["work"]

    def send(message_id: str, message_type: str, payload: dict):
        response = agent.post("/api/configs/backend/east/agent/messages", {"messages": [
            {"id": message_id, "type": message_type, "payload": payload}]}, format="json")
        assert response.json() == {"acked": [message_id]}

    def pods_of(work) -> dict[str, dict]:
        return {o["metadata"]["name"]: o for w in work if w["kind"] == "create"
                for o in w["payload"]["objects"] if o["kind"] == "Pod"}

    first = poll()
    old = pods_of(first)
    assert sorted(old) == [f"{name}-g-lead", f"{name}-g-worker"]
    poll([w["id"] for w in first])
    running = {"phase": "Running"}
    send("run", "pods", {"pods": [[{**pod, "spec": {**pod["spec"], "nodeName": "n1"},
                                    "status": running}, False] for pod in old.values()]})
    failed = {"phase": "Failed", "containerStatuses": [
        {"name": "lead", "state": {"terminated": {"exitCode": 3}}}]}
    lead = old[f"{name}-g-lead"]
    send("fail", "pods", {"pods": [[{**lead, "spec": {**lead["spec"], "nodeName": "n1"},
                                     "status": failed}, False]]})
    group = WorkflowGroup.objects.get(workflow__name=name)
    assert (group.status, group.retry_id) == ("SCHEDULING", 1)

    work = poll()
    # The earlier run's delete first, acked only once nothing of it is left; then the rerun.
    assert [w["kind"] for w in work] == ["delete", "create", "create"]
    assert work[0]["payload"] == {
        "podgroup": f"{name}-g", "retry": 1, "until_gone": True,
        "selector": f"app.kubernetes.io/managed-by=osmo,osmo.workflow={name},osmo.group=g,"
                    "osmo.retry!=1"}
    new = pods_of(work)
    assert sorted(new) == [f"{name}-g-lead-r1", f"{name}-g-worker-r1"]
    assert {pod["metadata"]["labels"]["osmo.retry"] for pod in new.values()} == {"1"}
    row = GroupDispatch.objects.get(group=group)
    assert (row.retry_id, row.applied_at, row.cleaned_at) == (1, None, None)
    assert poll() == work  # queued once

    # The earlier run's worker, deleted, and a late log of it: they say nothing of run 1.
    worker = old[f"{name}-g-worker"]
    send("gone", "pods", {"pods": [[{**worker, "status": running}, True]]})
    send("late", "pod_logs", {"task": [name, "worker"], "pod": f"{name}-g-worker", "retry": 0,
                              "text": "2026-01-02T03:04:05.000000000Z from run 0\n",
                              "events": [{"reason": "Killing", "message": "stopping"}]})
    assert sorted(Task.objects.filter(workflow__name=name).values_list(
        "name", "status", "retry_id")) == [("lead", "SCHEDULING", 1),
                                           ("worker", "SCHEDULING", 1)]
    assert not TaskEvent.objects.filter(task__workflow__name=name, reason="Killing").exists()
    assert not TaskLogChunk.objects.filter(task__workflow__name=name).exists()

    assert poll([w["id"] for w in work]) == []
    row.refresh_from_db()
    assert row.applied_at is not None and row.cleaned_at is None  # the rerun is no cleanup
    send("run1", "pods", {"pods": [[{**pod, "spec": {**pod["spec"], "nodeName": "n1"},
                                     "status": running}, False] for pod in new.values()]})
    assert sorted(Task.objects.filter(workflow__name=name).values_list(
        "name", "status", "retry_id")) == [("lead", "RUNNING", 1), ("worker", "RUNNING", 1)]
    send("log1", "pod_logs", {"task": [name, "worker"], "pod": f"{name}-g-worker-r1",
                              "retry": 1, "text": "", "events": [
                                  {"reason": "Pulled", "message": "pulled"}]})
    assert list(TaskEvent.objects.filter(task__workflow__name=name, reason="Pulled")
                .values_list("task__name", "retry_id")) == [("worker", 1)]
    # When the group ends, its objects are deleted as any ended group's.
    lifecycle.task_report_status(workflow=group.workflow, task_name="lead",
                                 status="COMPLETED", exit_code=0)
    cleanup = poll()
    assert [(w["kind"], w["payload"]["selector"]) for w in cleanup] == [
        ("delete", f"app.kubernetes.io/managed-by=osmo,osmo.workflow={name},osmo.group=g")]
    poll([w["id"] for w in cleanup])
    row.refresh_from_db()
    assert row.cleaned_at is not None


@pytest.mark.parametrize("placement", ["kai", "osmo"])
def test_a_pending_pods_reasons_are_kept_only_where_kai_places(admin_client, placement):
    """Under KAI the reasons ride on the pods; with `placement: osmo` our scheduler in the
    agent publishes its own, and a pod's report neither overwrites them nor costs a write."""
    assert admin_client.post("/api/configs/backend/west", {
        "kind": "kubernetes", "k8s_namespace": "west", "placement": placement},
        format="json").status_code == 201
    factories.pool("team", 64, backends=["west"])
    name = submit(make_client("alice", "osmo-team-user"), "team", spec(gpus=1))
    agent = make_client("agent-west", "osmo-backend-west")
    assert register(agent, name="west").status_code == 200
    work = agent.post("/api/configs/backend/west/agent/work", {"acks": [], "wait": 0},
                      format="json").json()["work"]
    pod = next(o for w in work for o in w["payload"]["objects"] if o["kind"] == "Pod")
    pending = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available"}]}
    response = agent.post("/api/configs/backend/west/agent/messages", {"messages": [
        {"id": "p", "type": "pods", "payload": {"pods": [[{**pod, "status": pending}, False]]}}
    ]}, format="json")
    assert response.json() == {"acked": ["p"]}
    reasons = GroupDispatch.objects.get(group__workflow__name=name).reasons
    events = list(TaskEvent.objects.filter(task__workflow__name=name, reason="Unschedulable")
                  .values_list("message", flat=True))
    if placement == "kai":
        assert reasons == [{"code": "unschedulable", "message": "0/3 nodes are available"}]
        assert len(events) == 1
    else:
        assert (reasons, events) == ([], [])
