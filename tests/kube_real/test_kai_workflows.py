"""Workflows as users write them, placed by the real KAI Scheduler (``OSMO_PLACEMENT=kai``):
the seeds' elastic and hierarchical gangs, a subpool's queue over its quota and reclaimed,
KAI's reasons in ``explain`` and on the workflow page, cancel, timeouts and a subpool's drain.
One API server and one KAI for the module (``kai``); each test has its own namespace."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from pools.models import Pool
from pools.services import subpool_archive_if_drained
from scheduler import services
from scheduler.backends.kubernetes import reasons
from scheduler.backends.kubernetes.kai_readiness import SILENT_AFTER_SECONDS, requirements_missing
from scheduler.backends.kubernetes.nodes import inventory
from scheduler.core.kai_names import DEFAULT_TOPOLOGY_NAME, RACK_LABEL, ZONE_LABEL
from scheduler.models import GroupDispatch
from tests import factories
from tests.dashboard.conftest import session_client
from tests.k8s.conftest import spec, statuses, submit, workflow
from workflows.models import WorkflowGroup

from .conftest import wait_for
from .kai import add_node
from .test_kai_scheduler import settle, wait_preempted, why_pending

pytestmark = pytest.mark.django_db


def nodes_of(cluster, name: str) -> dict[str, str | None]:
    """Pod → node of the workflow's pods (None: not bound)."""
    body = cluster.server.request("GET", cluster._path("pods"))
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in body["items"]
            if p["metadata"]["name"].startswith(f"{name}-")}


def bound_count(cluster, name: str) -> int:
    return sum(1 for node in nodes_of(cluster, name).values() if node)


def running_tasks(alice, name: str) -> list[str]:
    return sorted(t["name"] for g in workflow(alice, name)["groups"] for t in g["tasks"]
                  if t["status"] == "RUNNING")


def stepped(backend, predicate):
    def step():
        backend.listen()
        return predicate()
    return step


# --- seed 000: minSubGroup, and two levels of subgroups --------------------------------------

PREFILL = """
workflow:
  name: prefill
  groups:
  - name: g
    scheduling:
      minSubGroup: 3
      subGroups:
      - {name: p0, minMember: 8}
      - {name: p1, minMember: 8}
      - {name: p2, minMember: 8}
      - {name: p3, minMember: 8}
    tasks:
    - {name: p0, image: vllm, command: [serve], resource: r, replicas: 8, lead: true}
    - {name: p1, image: vllm, command: [serve], resource: r, replicas: 8}
    - {name: p2, image: vllm, command: [serve], resource: r, replicas: 8}
    - {name: p3, image: vllm, command: [serve], resource: r, replicas: 8}
  resources:
    r: {gpu: 1, cpu: 1, memory: 1Gi}
"""


def test_seed_000_min_subgroup_3_of_4_starts_three_whole_replicas_and_grows(
        kai_cluster, backend, cluster, alice, team) -> None:
    for i in range(3):
        add_node(cluster, f"n{i}", gpus=8)
    name = submit(alice, "team", PREFILL)
    assert backend.dispatch().applied == [f"{name}-g"]
    wait_for(stepped(backend, lambda: bound_count(cluster, name) == 24), 30,
             what="three replicas bound")
    time.sleep(2)  # more KAI cycles: no pod of the fourth replica on the 0 GPUs left
    placed = nodes_of(cluster, name)
    replicas = {pod.rsplit("-", 1)[0] for pod, node in placed.items() if node}
    assert len(replicas) == 3 and sum(1 for node in placed.values() if node) == 24
    settle(backend, alice, name, ("RUNNING", ["RUNNING"] * 24 + ["SCHEDULING"] * 8), cluster)
    add_node(cluster, "n3", gpus=8)  # elastic: the fourth replica joins the running gang
    settle(backend, alice, name, ("RUNNING", ["RUNNING"] * 32), cluster)


TWO_LEVEL = """
workflow:
  name: training-job
  groups:
  - name: g
    scheduling:
      minSubGroup: 2
      subGroups:
      - {name: decode, minSubGroup: 2}
      - {name: decode-leaders, parent: decode, minMember: 1}
      - {name: decode-workers, parent: decode, minMember: 4}
      - {name: prefill, minSubGroup: 2}
      - {name: prefill-leaders, parent: prefill, minMember: 1}
      - {name: prefill-workers, parent: prefill, minMember: 4}
    tasks:
    - {name: decode-leaders, image: x, command: [serve], resource: r, lead: true}
    - {name: decode-workers, image: x, command: [serve], resource: r, replicas: 4}
    - {name: prefill-leaders, image: x, command: [serve], resource: r}
    - {name: prefill-workers, image: x, command: [serve], resource: r, replicas: 4}
  resources:
    r: {gpu: 1, cpu: 1, memory: 1Gi}
"""


def test_seed_000_two_levels_of_subgroups_bind_all_ten_or_nothing(
        kai_cluster, backend, cluster, alice, team) -> None:
    add_node(cluster, "n1", gpus=8)  # 9 GPUs in all: one short of the ten the gang needs
    add_node(cluster, "n2", gpus=1)
    name = submit(alice, "team", TWO_LEVEL)
    assert backend.dispatch().applied == [f"{name}-g"]
    wait_for(lambda: len(why_pending(cluster)) == 10, 20, what="KAI's reasons on all ten")
    time.sleep(2)
    assert bound_count(cluster, name) == 0
    add_node(cluster, "n3", gpus=1)
    settle(backend, alice, name, ("RUNNING", ["RUNNING"] * 10), cluster)
    assert bound_count(cluster, name) == 10


# --- a subpool's queue: its quota, over-quota use of another's, and the reclaim ------------

def test_low_work_over_a_subpool_s_quota_runs_until_the_other_subpool_reclaims_it(
        kai_cluster, backend, cluster, alice, admin, team, namespace) -> None:
    factories.subpool(team, "a", 8)
    factories.subpool(team, "b", 8)
    for i in range(2):
        add_node(cluster, f"n{i}", gpus=8)
    within = submit(alice, "team--a", spec("within", gpus=8))
    over = submit(alice, "team--a", spec("over", gpus=8), priority="LOW")
    backend.dispatch()
    settle(backend, alice, within, ("RUNNING", ["RUNNING"]), cluster)
    settle(backend, alice, over, ("RUNNING", ["RUNNING"]), cluster)  # b's idle share
    claim = submit(alice, "team--b", spec("claim", gpus=8))
    assert backend.dispatch().applied == [f"{claim}-g"]
    wait_for(stepped(backend, lambda: statuses(alice, over)[0] == "FAILED_PREEMPTED"), 30,
             what=f"{over} reclaimed")
    settle(backend, alice, claim, ("RUNNING", ["RUNNING"]), cluster)
    assert statuses(alice, within) == ("RUNNING", ["RUNNING"])  # a's quota is kept
    assert workflow(alice, over)["reason"] == "preempted"


def test_a_low_gang_is_preempted_whole_by_high_work_of_the_same_pool(
        kai_cluster, backend, cluster, alice, team, namespace) -> None:
    add_node(cluster, "n1", gpus=8)
    low = submit(alice, "team", spec("filler", gpus=4, tasks=2), priority="LOW")
    backend.dispatch()
    settle(backend, alice, low, ("RUNNING", ["RUNNING", "RUNNING"]), cluster)
    high = submit(alice, "team", spec("urgent", gpus=8), priority="HIGH")
    assert backend.dispatch().applied == [f"{high}-g"]
    preempted = wait_preempted(backend, alice, low)
    assert f"for PodGroup {namespace}/{high}-g" in preempted[0]
    settle(backend, alice, high, ("RUNNING", ["RUNNING"]), cluster)


# --- why a workflow waits, in KAI's words ---------------------------------------------------

def test_kai_s_reason_reaches_explain_and_the_workflow_page(kai_cluster, backend, cluster,
                                                             alice, team) -> None:
    add_node(cluster, "n1", gpus=4)
    name = submit(alice, "team", spec("big", gpus=8))
    backend.dispatch()
    wait_for(stepped(backend, lambda: GroupDispatch.objects.filter(
        group__workflow__name=name).exclude(reasons=[]).exists()), 20,
        what="KAI's reasons kept")
    # KAI answered: no "scheduler silent", however long the group waits.
    later = timezone.now() + timedelta(seconds=SILENT_AFTER_SECONDS + 1)
    assert requirements_missing(backend.kube, now=later) == []
    reasons.pending_publish(now=later)
    (group,) = alice.get(f"/api/workflow/{name}/explain").json()["groups"]
    kai_words = why_pending(cluster)[f"{name}-g-t0"]
    assert [r["message"] for r in group["reasons"]] == [kai_words]
    assert "nvidia.com/gpu" in kai_words or "GPU" in kai_words, kai_words
    page = session_client("alice", "osmo-team-user").get(f"/workflows/{name}/")
    assert page.status_code == 200
    assert kai_words in page.content.decode()


# --- what ends a workflow deletes what KAI placed --------------------------------------------

def test_cancel_deletes_the_pods_and_podgroup_kai_placed(kai_cluster, backend, cluster,
                                                         alice, team) -> None:
    add_node(cluster, "n1", gpus=8)
    name = submit(alice, "team", spec("stop", gpus=4, tasks=2))
    backend.dispatch()
    settle(backend, alice, name, ("RUNNING", ["RUNNING", "RUNNING"]), cluster)
    assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
    assert backend.cleanup() == 1
    assert cluster.get("podgroups", f"{name}-g") is None
    wait_for(lambda: not nodes_of(cluster, name), 20, what="the pods gone")
    # The freed GPUs are KAI's to give again.
    other = submit(alice, "team", spec("next", gpus=8))
    backend.dispatch()
    settle(backend, alice, other, ("RUNNING", ["RUNNING"]), cluster)


def test_an_exec_timeout_deletes_what_kai_placed(kai_cluster, backend, cluster, alice,
                                                 team) -> None:
    add_node(cluster, "n1", gpus=8)
    name = submit(alice, "team", spec("timed", gpus=8, extra="  timeout: {exec_timeout: 1m}\n"))
    backend.dispatch()
    settle(backend, alice, name, ("RUNNING", ["RUNNING"]), cluster)
    started = WorkflowGroup.objects.get(workflow__name=name).started_at
    assert services.timeouts_enforce(now=started + timedelta(seconds=61)) == 1
    assert backend.cleanup() == 1
    assert cluster.get("podgroups", f"{name}-g") is None
    wait_for(lambda: not nodes_of(cluster, name), 20, what="the pod gone")
    assert statuses(alice, name) == ("FAILED_EXEC_TIMEOUT", ["FAILED_EXEC_TIMEOUT"])


def test_a_queue_timeout_deletes_a_gang_kai_could_not_place(kai_cluster, backend, cluster,
                                                            alice, team) -> None:
    add_node(cluster, "n1", gpus=4)
    name = submit(alice, "team", spec("queued", gpus=8,
                                      extra="  timeout: {queue_timeout: 30s}\n"))
    backend.dispatch()
    wait_for(lambda: why_pending(cluster), 20, what="KAI's reason")
    queued_at = WorkflowGroup.objects.get(workflow__name=name).scheduling_at
    assert services.timeouts_enforce(now=queued_at + timedelta(seconds=31)) == 1
    assert backend.cleanup() == 1
    assert cluster.names("pods") == [] and cluster.names("podgroups") == []
    assert statuses(alice, name) == ("FAILED_QUEUE_TIMEOUT", ["FAILED_QUEUE_TIMEOUT"])


def test_a_deleted_subpool_is_archived_once_kai_s_pods_are_gone(kai_cluster, backend, cluster,
                                                                alice, admin, team) -> None:
    factories.subpool(team, "a", 16)
    add_node(cluster, "n1", gpus=8)
    name = submit(alice, "team--a", spec("last", gpus=8))
    backend.dispatch()
    settle(backend, alice, name, ("RUNNING", ["RUNNING"]), cluster)
    response = admin.delete("/api/configs/pool/team/subpool/a")
    assert (response.status_code, response.json()["state"]) == (202, "DELETING")
    sub = Pool.objects.get(name="team--a")
    assert subpool_archive_if_drained(subpool_id=sub.pk) is False
    cluster.finish(f"{name}-g-t0")
    settle(backend, alice, name, ("COMPLETED", ["COMPLETED"]))
    assert subpool_archive_if_drained(subpool_id=sub.pk) is True
    assert backend.cleanup() == 1
    assert cluster.get("podgroups", f"{name}-g") is None
    assert Pool.objects.get(pk=sub.pk).subpool_state == "ARCHIVED"


SUBGROUP_RACKS = """
workflow:
  name: racked
  groups:
  - name: g
    scheduling:
      subGroups:
      - {name: a, minMember: 2, topologyConstraint: {requiredTopologyLevel: rack}}
      - {name: b, minMember: 2, topologyConstraint: {requiredTopologyLevel: rack}}
    tasks:
    - {name: a, image: x, command: [train], resource: r, replicas: 2, lead: true}
    - {name: b, image: x, command: [train], resource: r, replicas: 2}
  resources:
    r: {gpu: 8, cpu: 2, memory: 8Gi}
"""


def test_each_subgroup_s_rack_constraint_keeps_it_on_one_rack(kai_cluster, backend, cluster,
                                                              alice, team) -> None:
    # r2 is one node (first by name): no subgroup of two 8-GPU pods fits there.
    racks = {"a0": "r2", "b0": "r1", "b1": "r1", "c0": "r3", "c1": "r3"}
    for node, rack in racks.items():
        add_node(cluster, node, gpus=8, labels={RACK_LABEL: rack, ZONE_LABEL: "z1"})
    inventory(backend.kube)
    name = submit(alice, "team", SUBGROUP_RACKS)
    assert backend.dispatch().applied == [f"{name}-g"]
    subgroups = cluster.get("podgroups", f"{name}-g")["spec"]["subGroups"]
    assert [s["topologyConstraint"] for s in subgroups] == [
        {"requiredTopologyLevel": RACK_LABEL, "topology": DEFAULT_TOPOLOGY_NAME}] * 2
    settle(backend, alice, name, ("RUNNING", ["RUNNING"] * 4), cluster)
    placed = nodes_of(cluster, name)
    by_subgroup = {s: {racks[placed[f"{name}-g-{s}-{i}"]] for i in range(2)} for s in "ab"}
    assert sorted(r for rs in by_subgroup.values() for r in rs) == ["r1", "r3"], placed


# --- an exit action's RESCHEDULE ---------------------------------------------------------------

RESCHEDULED = """
workflow:
  name: flaky
  tasks:
  - {name: main, image: nvcr.io/x:1, command: [train], resource: r,
     exitActions: {RESCHEDULE: "3"}}
  resources:
    r: {gpu: 2, cpu: 1, memory: 1Gi}
"""


def test_kai_places_a_rescheduled_group_again_under_its_new_podgroup(
        kai_cluster, backend, cluster, alice, team) -> None:
    add_node(cluster, "n0", gpus=2)  # one run's GPUs: the next fits once the first is gone
    name = submit(alice, "team", RESCHEDULED)
    backend.dispatch()
    first, group = f"{name}-main-group-main", f"{name}-main-group"
    wait_for(stepped(backend, lambda: statuses(alice, name)[1] == ["RUNNING"]), 30,
             what="the first run RUNNING")
    cluster.finish(first, 3)
    wait_for(stepped(backend, lambda: [(t["status"], t["retry_id"]) for g in workflow(
        alice, name)["groups"] for t in g["tasks"]] == [("SCHEDULING", 1)]), 20,
        what="rescheduled")
    wait_for(lambda: backend.cleanup() >= 0 and backend.dispatch().applied == [group], 20,
             what="the new run dispatched")
    assert cluster.get("pods", first) is None
    assert cluster.get("podgroups", group)["metadata"]["labels"]["osmo.retry"] == "1"
    second = f"{first}-r1"
    wait_for(stepped(backend, lambda: statuses(alice, name)[1] == ["RUNNING"]), 30,
             what="KAI placed the second run")
    assert nodes_of(cluster, name) == {second: "n0"}
    cluster.finish(second, 0)
    wait_for(stepped(backend, lambda: statuses(alice, name) == ("COMPLETED", ["COMPLETED"])),
             20, what="COMPLETED")
    assert WorkflowGroup.objects.get(workflow__name=name).retry_id == 1
