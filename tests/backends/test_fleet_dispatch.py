"""The fleet (issue 46): a gang of a pool naming several backends goes wholly to one, where
it starts soonest; only that backend takes it; a backend silent past its lease gives its
not-started gangs back at once, fenced; a waiting gang moves to a backend that starts it now,
at most once per interval."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduler import services as scheduler_services
from scheduler.backends.agent.work import claim_groups
from scheduler.backends.fleet import FleetSummary, fleet_pass
from scheduler.backends.kubernetes.dispatch import Dispatcher
from scheduler.backends.spec import spec_for
from scheduler.core.kai_names import TASK_NAME_ANNOTATION, WORKFLOW_NAME_ANNOTATION
from scheduler.models import AgentWork, Backend, GroupDispatch, Node
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, submit
from tests.races import all_together
from workflows import lifecycle
from workflows.models import Task, TaskEvent, WorkflowGroup

pytestmark = pytest.mark.django_db


def cluster(admin, name: str, *gpus: int) -> None:
    response = admin.post(f"/api/configs/backend/{name}", {"kind": "kubernetes",
                                                           "k8s_namespace": name},
                          format="json")
    assert response.status_code == 201, response.json()
    Backend.objects.filter(name=name).update(last_heartbeat=timezone.now())
    for index, count in enumerate(gpus):
        node(admin, name, index, count)


def node(admin, backend: str, index: int, gpus: int) -> None:
    """A Node as a kubernetes backend's node mirror (its agent) registers it."""
    name = f"{backend}-{index}"
    scheduler_services.node_register(name=name, gpus=gpus, cpu_millis=64000,
                                     memory_bytes=512 << 30,
                                     labels={"kubernetes.io/hostname": name}, backend=backend)


def group(name: str) -> WorkflowGroup:
    return WorkflowGroup.objects.get(workflow__name=name)


@pytest.fixture
def alice(db):
    return make_client("alice", "osmo-team-user")


def team():
    return factories.pool("team", 256, backends=["east", "west"])


def test_a_gang_goes_where_it_starts_and_only_that_backend_takes_it(admin_client, alice):
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west", 8, 8)
    factories.pool("team", 256, backends=["east", "west"])
    big = submit(alice, "team", spec("big", gpus=8, tasks=2))  # east can never hold it
    small = submit(alice, "team", spec("small", gpus=8))  # west's room is big's now
    summary = fleet_pass()
    assert (summary.chosen, summary.moved, summary.redispatched) == (2, 0, 0)
    assert (group(big).backend, group(small).backend) == ("west", "east")
    now = timezone.now()
    for name, want in (("west", [big]), ("east", [small])):
        runnable = Dispatcher(None, spec=spec_for(name)).runnable(now)
        assert [g.workflow.name for g in runnable] == want
    assert fleet_pass().chosen == 0  # chosen once: nothing changes on the next pass
    # The agent of east claims only east's.
    assert claim_groups(Backend.objects.get(name="east")) == 1
    assert list(GroupDispatch.objects.values_list("group__workflow__name", flat=True)) == [small]

    body = alice.get(f"/api/workflow/{big}/explain").json()["groups"][0]
    assert body["backend"] == "west"
    assert body["backend_choice"]["backend"] == "west"
    [east] = body["backend_choice"]["passed_over"]
    assert east["backend"] == "east" and east["code"] == "insufficient_gpus"
    assert east["message"] == ("backend east: its nodes could never hold the gang, even "
                               "empty: it has 1 node(s) of 8 GPUs; the gang needs 2 whole one(s)")


def test_the_most_free_gpus_win_when_several_start_it_now(admin_client, alice):
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west", 8, 8)
    team()
    name = submit(alice, "team", spec("one", gpus=4))
    assert fleet_pass().chosen == 1
    assert group(name).backend == "west"
    body = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0]["backend_choice"]
    assert body["passed_over"] == [{
        "backend": "east", "code": "backend_ranked_lower",
        "message": "backend east: it could start here too; west was chosen first"}]


def race(group_id: int) -> dict[str, set[int]]:
    """Two connections record a choice for one group at the same moment, east and west."""
    names = ("east", "west")
    won = all_together([lambda name=name: lifecycle.groups_choose_backend({group_id: name})
                        for name in names])
    return dict(zip(names, won, strict=True))


@pytest.mark.django_db(transaction=True)
def test_two_connections_choosing_for_one_group_exactly_one_wins():
    for name in ("east", "west"):
        Backend.objects.create(name=name, kind="embedded")
    pool = factories.pool("team", 64, backends=["east", "west"])
    for _round in range(10):
        target = factories.pending_workflow(pool, 1).groups.get()
        WorkflowGroup.objects.filter(pk=target.pk).update(status="SCHEDULING")
        won = race(target.pk)
        winners = [name for name, ids in won.items() if ids == {target.pk}]
        assert len(winners) == 1 and sorted(won) == ["east", "west"]
        assert [ids for name, ids in won.items() if name not in winners] == [set()]
        assert WorkflowGroup.objects.get(pk=target.pk).backend == winners[0]


def two_clusters(admin) -> tuple:
    """east and west of 8 GPUs each, the pool team on both; their agents' clients."""
    cluster(admin, "east", 8)
    cluster(admin, "west", 8)
    team()
    return (make_client("agent-east", "osmo-backend-east"),
            make_client("agent-west", "osmo-backend-west"))


def poll(agent, name: str, acks=()) -> list[dict]:
    response = agent.post(f"/api/configs/backend/{name}/agent/work",
                          {"acks": list(acks), "wait": 0}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["work"]


def register(agent, name: str) -> None:
    response = agent.post(f"/api/configs/backend/{name}/agent/register",
                          {"k8s_uid": f"uid-{name}", "version": "v1"}, format="json")
    assert response.status_code in (200, 201), response.json()


@override_settings(OSMO_BACKEND_LEASE=30)
def test_a_silent_backend_gives_its_waiting_gangs_back_fenced(admin_client, alice):
    east, west = two_clusters(admin_client)
    register(east, "east")
    name = submit(alice, "team", spec("w", gpus=1))
    assert fleet_pass().chosen == 1  # east: a tie, the pool's order
    work = poll(east, "east")  # claimed, created
    assert group(name).backend == "east"
    creates = [w for w in work if w["kind"] == "create"]
    assert creates
    poll(east, "east", [{"id": w["id"]} for w in work])
    assert GroupDispatch.objects.get(group=group(name)).applied_at is not None

    Backend.objects.filter(name="east").update(
        last_heartbeat=timezone.now() - timedelta(seconds=31))
    summary = fleet_pass()
    assert (summary.redispatched, summary.chosen) == (1, 1)
    assert group(name).backend == "west"
    assert not GroupDispatch.objects.filter(group=group(name)).exists()
    assert TaskEvent.objects.filter(workflow__name=name, reason="BackendMoved").count() == 1
    register(west, "west")
    west_work = poll(west, "west")
    assert [w["kind"] for w in west_work] == ["sync", "create", "create"]  # head, pods
    poll(west, "west", [{"id": w["id"]} for w in west_work])

    # east returns: it is given the fence alone, before any other work (the sync included).
    register(east, "east")
    work = poll(east, "east")
    assert [(w["kind"], w["payload"]["fence"]) for w in work] == [("delete", True)]
    # Its stale report of the moved gang's pod changes nothing.
    before = list(Task.objects.filter(workflow__name=name).values())
    pod = {"metadata": {"name": f"{name}-g-t0", "annotations": {
        WORKFLOW_NAME_ANNOTATION: name, TASK_NAME_ANNOTATION: "t0"}},
        "spec": {"nodeName": "east-0"}, "status": {"phase": "Running"}}
    answer = east.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "stale", "type": "pods", "payload": {"pods": [[pod, False]]}}]}, format="json")
    assert answer.json() == {"acked": ["stale"]}
    assert list(Task.objects.filter(workflow__name=name).values()) == before
    # The fence acked: west's dispatch is untouched and east gets its other work again.
    after = poll(east, "east", [{"id": work[0]["id"]}])
    assert [w["kind"] for w in after] == ["sync"]
    row = GroupDispatch.objects.get(group=group(name))
    assert (row.applied_at is not None, row.cleaned_at) == (True, None)
    assert AgentWork.objects.filter(backend="east", kind="create").exclude(
        outcome="moved").count() == 0


@override_settings(OSMO_BACKEND_LEASE=30)
def test_a_pool_whose_backends_are_all_offline_admits_waits_and_says_why(admin_client, alice):
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west", 8)
    team()
    Backend.objects.update(last_heartbeat=timezone.now() - timedelta(seconds=60))
    name = submit(alice, "team", spec("w", gpus=1))
    assert fleet_pass().chosen == 0
    assert group(name).backend is None
    body = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0]
    assert body["reasons"][0]["code"] == "backends_unavailable"
    assert body["backend_choice"]["backend"] is None
    assert [(p["backend"], p["code"], p["message"])
            for p in body["backend_choice"]["passed_over"]] == [
        ("east", "backend_unusable", "backend east: it is OFFLINE (no heartbeat for 60 s)"),
        ("west", "backend_unusable", "backend west: it is OFFLINE (no heartbeat for 60 s)")]


def test_a_waiting_gang_moves_once_per_interval_and_never_once_a_pod_ran(admin_client, alice):
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west")  # no nodes yet: it could never hold a gang
    team()
    first = submit(alice, "team", spec("first", gpus=8))
    second = submit(alice, "team", spec("second", gpus=8))
    assert fleet_pass().chosen == 2
    assert (group(first).backend, group(second).backend) == ("east", "east")  # second waits
    node(admin_client, "west", 0, 8)
    # The frequent callers' pass (each dispatch pass, each agent poll) never moves.
    assert fleet_pass(moves=False) == FleetSummary()
    assert group(second).backend == "east"
    with override_settings(OSMO_FLEET_MOVE_INTERVAL=3600):
        assert fleet_pass().moved == 1
        assert group(second).backend == "west" and group(second).backend_moved_at is not None
        # west can no longer hold it and east has room: within the interval it stays.
        Node.objects.filter(name="west-0").update(schedulable=False)
        node(admin_client, "east", 1, 8)
        assert fleet_pass().moved == 0
        assert group(second).backend == "west"
    with override_settings(OSMO_FLEET_MOVE_INTERVAL=0):
        assert fleet_pass().moved == 1
        assert group(second).backend == "east"
    # A gang whose pod ran never moves, whatever the interval.
    third = submit(alice, "team", spec("third", gpus=8))
    assert fleet_pass().chosen == 1
    Task.objects.filter(group=group(third)).update(started_at=timezone.now())
    with override_settings(OSMO_FLEET_MOVE_INTERVAL=0):
        backend = group(third).backend
        assert fleet_pass().moved == 0
        assert group(third).backend == backend


def busy_on(pool, node_name: str, gpus: int, exec_timeout: int | None):
    """A running workflow holding `gpus` on `node_name`, ending at its exec_timeout."""
    workflow = factories.running_workflow(pool, gpus)
    Task.objects.filter(workflow=workflow).update(node_name=node_name)
    workflow.groups.update(started_at=timezone.now())
    type(workflow).objects.filter(pk=workflow.pk).update(exec_timeout_seconds=exec_timeout)
    return workflow


def test_among_backends_that_cannot_start_it_now_the_soonest_start_wins(admin_client, alice):
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west", 8)
    pool = team()
    busy_on(pool, "west-0", 8, None)  # west's work never ends by itself
    busy_on(pool, "east-0", 8, 3600)  # east's ends within the hour
    name = submit(alice, "team", spec("next", gpus=8))
    assert fleet_pass().chosen == 1
    assert group(name).backend == "east"
    [west] = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0][
        "backend_choice"]["passed_over"]
    assert (west["backend"], west["code"]) == ("west", "insufficient_gpus")
    assert west["message"] == "backend west: no whole 8-GPU node free"


def test_a_backend_passed_over_says_until_when_its_nodes_are_taken(admin_client, alice):
    cluster(admin_client, "east", 8, 8)
    cluster(admin_client, "west", 8, 8)
    pool = team()
    for node in ("east-0", "east-1"):
        busy_on(pool, node, 8, 7200)
    for node in ("west-0", "west-1"):
        busy_on(pool, node, 8, 3600)
    name = submit(alice, "team", spec("pair", gpus=8, tasks=2))
    assert fleet_pass().chosen == 1
    assert group(name).backend == "west"  # free in an hour, east in two
    [east] = alice.get(f"/api/workflow/{name}/explain").json()["groups"][0][
        "backend_choice"]["passed_over"]
    started = min(WorkflowGroup.objects.filter(started_at__isnull=False)
                  .values_list("started_at", flat=True))
    until = timezone.localtime(started + timedelta(seconds=7200))
    assert east["message"] == f"backend east: no 2 whole 8-GPU nodes free (0 are) until " \
                              f"{until:%H:%M}"


def test_a_moved_gang_is_created_on_its_new_cluster_only_once_the_old_one_deleted_it(
        admin_client, alice):
    """A move between two ONLINE clusters: the old one's pods might still be placed there, so
    the new one creates nothing until the old agent acks the fence; a gang is never in two
    clusters at once. Were the old agent to go silent first, its lease frees the group."""
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west")
    team()
    east = make_client("agent-east", "osmo-backend-east")
    west = make_client("agent-west", "osmo-backend-west")
    register(east, "east")
    register(west, "west")
    first = submit(alice, "team", spec("first", gpus=8))
    second = submit(alice, "team", spec("second", gpus=8))
    assert fleet_pass().chosen == 2
    work = poll(east, "east")  # both created on east; second waits there for room
    assert {w["payload"]["podgroup"] for w in work if w["kind"] == "create"} == {
        group(first).podgroup, group(second).podgroup}
    poll(east, "east", [{"id": w["id"]} for w in work])
    node(admin_client, "west", 0, 8)
    with override_settings(OSMO_FLEET_MOVE_INTERVAL=0):
        assert fleet_pass().moved == 1
    assert group(second).backend == "west"
    # west claims nothing while east may still hold second's pods.
    assert claim_groups(Backend.objects.get(name="west")) == 0
    assert [w["kind"] for w in poll(west, "west")] == ["sync"]
    fence = poll(east, "east")
    assert [(w["kind"], w["payload"]["podgroup"]) for w in fence] == [
        ("delete", group(second).podgroup)]
    # Acked only once nothing of it is left on east: a pod bound meanwhile may terminate.
    assert fence[0]["payload"]["until_gone"] is True
    poll(east, "east", [{"id": fence[0]["id"]}])  # east deleted them: west may create them
    assert claim_groups(Backend.objects.get(name="west")) == 1
    assert GroupDispatch.objects.get(group=group(second)).applied_at is None


def moved_from_east(admin_client, alice) -> tuple[str, str]:
    """Two 8-GPU gangs created on east (8 GPUs), then west's 8 GPUs appear: the one waiting
    moves west, held there until east deletes it. Returns (waiting on east, moved)."""
    cluster(admin_client, "east", 8)
    cluster(admin_client, "west")
    team()
    east = make_client("agent-east", "osmo-backend-east")
    register(east, "east")
    first = submit(alice, "team", spec("first", gpus=8))
    second = submit(alice, "team", spec("second", gpus=8))
    assert fleet_pass().chosen == 2
    poll(east, "east", [{"id": w["id"]} for w in poll(east, "east")])
    node(admin_client, "west", 0, 8)
    with override_settings(OSMO_FLEET_MOVE_INTERVAL=0):
        assert fleet_pass().moved == 1
    assert claim_groups(Backend.objects.get(name="west")) == 0
    return first, second


def east_silent() -> None:
    Backend.objects.filter(name="east").update(
        last_heartbeat=timezone.now() - timedelta(seconds=31))


@override_settings(OSMO_BACKEND_LEASE=30)
def test_a_move_whose_old_cluster_goes_silent_is_released_by_the_lease(admin_client, alice):
    first, second = moved_from_east(admin_client, alice)
    east_silent()
    # east is OFFLINE: second is freed, first (never started either) is taken back too.
    assert fleet_pass().redispatched == 1
    assert claim_groups(Backend.objects.get(name="west")) == 2
    assert {group(first).backend, group(second).backend} == {"west"}
    # The fences stay first in line for east's return, one per group.
    assert sorted(AgentWork.objects.filter(backend="east", kind="delete", acked_at__isnull=True)
                  .values_list("group__workflow__name", flat=True)) == [first, second]


RERUN_ON_BACKEND_ERROR = """
workflow:
  name: w
  groups:
  - name: g
    tasks:
    - name: t0
      image: nvcr.io/x:1
      command: [train]
      resource: r
      lead: true
      exitActions: {RESCHEDULE: "3001"}
  resources:
    r: {gpu: 8, cpu: 2, memory: 8Gi}
"""


@override_settings(OSMO_BACKEND_LEASE=30, OSMO_BACKEND_LOST_TIMEOUT=600)
def test_a_lost_clusters_running_gang_that_asks_runs_again_on_another_fenced(admin_client,
                                                                          alice):
    """Issue 46: past the lost timeout a running gang whose spec asks (RESCHEDULE over 3001,
    OSMO's backend error) runs again elsewhere: its next run is created on west, named for
    its retry, and east, back, deletes every run of it before anything else."""
    from scheduler.backends.lost import backends_lost_pass

    east, west = two_clusters(admin_client)
    register(east, "east")
    name = submit(alice, "team", RERUN_ON_BACKEND_ERROR)
    assert fleet_pass().chosen == 1
    work = poll(east, "east")
    poll(east, "east", [{"id": w["id"]} for w in work])
    pod = {"metadata": {"name": f"{name}-g-t0", "annotations": {
        WORKFLOW_NAME_ANNOTATION: name, TASK_NAME_ANNOTATION: "t0"}},
        "spec": {"nodeName": "east-0"}, "status": {"phase": "Running"}}
    east.post("/api/configs/backend/east/agent/messages", {"messages": [
        {"id": "running", "type": "pods", "payload": {"pods": [[pod, False]]}}]}, format="json")
    assert list(Task.objects.values_list("status", "node_name")) == [("RUNNING", "east-0")]

    Backend.objects.filter(name="east").update(
        last_heartbeat=timezone.now() - timedelta(seconds=30 + 600 + 1))
    assert backends_lost_pass() == {"east": 1}
    assert list(Task.objects.values_list("status", "retry_id", "node_name")) == [
        ("SCHEDULING", 1, "")]
    summary = fleet_pass()
    assert (summary.redispatched, summary.chosen) == (1, 1)
    assert group(name).backend == "west"
    register(west, "west")
    west_work = poll(west, "west")
    pods = [o["metadata"]["name"] for w in west_work if w["kind"] == "create"
            for o in w["payload"]["objects"] if o["kind"] == "Pod"]
    assert pods == [f"{name}-g-t0-r1"]

    register(east, "east")  # back: the fence of every run of the gang, alone, first
    fence = poll(east, "east")
    assert [(w["kind"], w["payload"]["fence"]) for w in fence] == [("delete", True)]
    assert "osmo.retry" not in fence[0]["payload"]["selector"]  # every run, not one


@override_settings(OSMO_BACKEND_LEASE=30)
def test_the_pass_every_agent_poll_runs_releases_a_move_whose_old_cluster_went_silent(
        admin_client, alice):
    """Nothing else waits unchosen or on the silent cluster: the frequent pass (moves=False,
    each agent poll's) still frees the moved group at once, not at the next beat."""
    first, second = moved_from_east(admin_client, alice)
    assert alice.post(f"/api/workflow/{first}/cancel").status_code == 200
    west = Backend.objects.get(name="west")
    assert fleet_pass(moves=False) == FleetSummary()  # east ONLINE: second is held
    assert claim_groups(west) == 0
    east_silent()
    fleet_pass(moves=False)
    assert claim_groups(west) == 1
    assert group(second).backend == "west"
    assert AgentWork.objects.filter(backend="east", kind="delete", acked_at__isnull=True,
                                    group=group(second)).count() == 1  # still first in line


def test_a_backends_queue_share_covers_what_it_claims_before_its_creates(admin_client, alice):
    """The poll that chooses a gang for the second backend of a pool (whose Queue share is
    only what its work needs) syncs that share ahead of the gang's creates: its placement
    never meets a Queue that lags the work it was sent."""
    east, west = two_clusters(admin_client)
    register(east, "east")
    register(west, "west")
    submit(alice, "team", spec("first", gpus=8))
    second = submit(alice, "team", spec("second", gpus=8))
    work = poll(west, "west")  # its own pass chooses: first → east, second → west
    assert group(second).backend == "west"
    creates = [w["id"] for w in work if w["kind"] == "create"]
    syncs = [w for w in work if w["kind"] == "sync" and w["id"] < min(creates)]

    def team_quota(sync: dict) -> int:
        queue = next(o for o in sync["payload"]["objects"]
                     if o["kind"] == "Queue" and o["metadata"]["name"].endswith("team"))
        return queue["spec"]["resources"]["gpu"]["quota"]

    assert creates and team_quota(syncs[-1]) == 8
