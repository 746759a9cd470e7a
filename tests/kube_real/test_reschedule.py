"""An exit action's RESCHEDULE on the real API server: the group's earlier run (pods, PodGroup,
Service) leaves first — a pod still terminating holds the rerun back — then the new run is
dispatched under new pod names and the ``osmo.retry`` label, with both placements; the other
group is untouched, and a pod of the earlier run says nothing of the task any more — by the
in-process backend and through a backend's agent (its work queue: the delete of the earlier
run before the creates of the new)."""

from __future__ import annotations

import time

import pytest

from osmo.accounts import services as accounts
from scheduler.backends import services as backend_services
from scheduler.models import GroupDispatch, Node
from tests import factories
from tests.k8s.conftest import submit, workflow
from workflows.models import Task, TaskEvent

from .agent import AgentProcess, agent_kubeconfig, install_agent_rbac, wait_until
from .conftest import wait_for
from .osmo_placement import n, running

pytestmark = pytest.mark.django_db

TWO_GROUPS = """
workflow:
  name: ft
  groups:
  - name: train
    tasks:
    - {name: lead, image: nvcr.io/x:1, command: [train], resource: r, lead: true,
       exitActions: {RESCHEDULE: "3"}}
    - {name: worker, image: nvcr.io/x:1, command: [train], resource: r}
  - name: side
    tasks:
    - {name: eval, image: nvcr.io/x:1, command: [eval], resource: r, lead: true}
  resources:
    r: {gpu: 2, cpu: 2, memory: 8Gi}
"""

ONE_TASK = """
workflow:
  name: once
  tasks:
  - {name: main, image: nvcr.io/x:1, command: [train], resource: r,
     exitActions: {RESCHEDULE: "3"}}
  resources:
    r: {gpu: 2, cpu: 2, memory: 8Gi}
"""


def tasks_of(client, name: str) -> dict[str, tuple[str, int]]:
    return {t["name"]: (t["status"], t["retry_id"])
            for g in workflow(client, name)["groups"] for t in g["tasks"]}


def retry_labels(cluster, plural: str) -> dict[str, str]:
    body = cluster.server.request("GET", cluster._path(plural))
    return {item["metadata"]["name"]: item["metadata"]["labels"].get("osmo.retry")
            for item in body["items"]}


def test_a_rescheduled_group_runs_again_after_its_earlier_run_is_gone(
        backend, cluster, alice) -> None:
    factories.pool("team", 64, max_retries=2)
    cluster.add_node("n1", gpus=8)
    name = submit(alice, "team", TWO_GROUPS)
    assert sorted(backend.dispatch().applied) == [f"{name}-side", f"{name}-train"]
    backend.listen()
    old = [f"{name}-train-lead", f"{name}-train-worker"]
    for pod in [*old, f"{name}-side-eval"]:
        cluster.run(pod, "n1")
    backend.listen()
    assert tasks_of(alice, name) == {"lead": ("RUNNING", 0), "worker": ("RUNNING", 0),
                                     "eval": ("RUNNING", 0)}
    first_side = cluster.get("pods", f"{name}-side-eval")["metadata"]["uid"]

    cluster.finish(old[0], 3)  # an NCCL flake, as the spec's exit action knows it
    backend.listen()
    assert tasks_of(alice, name) == {"lead": ("SCHEDULING", 1), "worker": ("SCHEDULING", 1),
                                     "eval": ("RUNNING", 0)}
    lead = Task.objects.get(workflow__name=name, name="lead")
    assert (lead.node_name, lead.exit_code, lead.reason) == ("", None, "rescheduled")
    assert list(TaskEvent.objects.filter(task=lead, reason="Rescheduled")
                .values_list("message", flat=True)) == [
        "exit code 3: its group runs again (retry 1 of 2)"]
    # A full re-list still sees the earlier run's failed pod: it reschedules nothing again.
    backend.listener.relist()
    assert tasks_of(alice, name)["lead"] == ("SCHEDULING", 1)
    # Nothing new while the earlier run's objects are there.
    assert backend.dispatch().applied == []
    assert cluster.names("pods") == sorted([*old, f"{name}-side-eval"])

    backend.cleanup()
    assert cluster.get("pods", old[0]) is None  # a pod that ended goes at once
    # A running one stays Terminating until its kubelet confirms (none here).
    assert cluster.get("pods", old[1])["metadata"]["deletionTimestamp"]
    assert cluster.get("podgroups", f"{name}-train") is None
    assert cluster.get("podgroups", f"{name}-side") is not None
    backend.listen()  # the earlier run's pods going away ends no task
    assert tasks_of(alice, name) == {"lead": ("SCHEDULING", 1), "worker": ("SCHEDULING", 1),
                                     "eval": ("RUNNING", 0)}
    assert backend.dispatch().applied == []  # never beside a terminating predecessor
    assert GroupDispatch.objects.get(group__name="train").retry_id == 0

    cluster.delete_pod(old[1], final=True)  # the kubelet confirms
    backend.cleanup()
    row = GroupDispatch.objects.get(group__name="train")
    assert (row.retry_id, row.applied_at) == (1, None)
    assert backend.dispatch().applied == [f"{name}-train"]
    new = [f"{name}-train-lead-r1", f"{name}-train-worker-r1"]
    assert retry_labels(cluster, "pods") == {new[0]: "1", new[1]: "1",
                                             f"{name}-side-eval": "0"}
    assert retry_labels(cluster, "podgroups") == {f"{name}-train": "1", f"{name}-side": "0"}
    assert cluster.get("pods", f"{name}-side-eval")["metadata"]["uid"] == first_side

    backend.listen()
    for pod in new:
        cluster.run(pod, "n1")
    backend.listen()
    assert tasks_of(alice, name) == {"lead": ("RUNNING", 1), "worker": ("RUNNING", 1),
                                     "eval": ("RUNNING", 0)}
    cluster.finish(new[0], 0)
    cluster.finish(f"{name}-side-eval", 0)
    backend.listen()
    body = workflow(alice, name)
    assert body["status"] == "COMPLETED"
    assert [(g["name"], g["retry_id"]) for g in body["groups"]] == [("train", 1), ("side", 0)]
    listed = {t["task_name"]: t["retry_id"] for t in alice.get(
        f"/api/task?workflow_id={name}").json()["tasks"]}
    assert listed == {"lead": 1, "worker": 1, "eval": 0}
    assert backend.cleanup() == 2
    assert cluster.names("pods") == [] or all(
        cluster.get("pods", p)["metadata"].get("deletionTimestamp")
        for p in cluster.names("pods"))


def test_osmo_placement_runs_the_rerun_and_the_last_retry_fails(
        sched, backend, cluster, alice, namespace, apiserver) -> None:
    factories.pool("team", 64, max_retries=1)
    cluster.add_node(n(namespace, 1), gpus=2)  # room for one run at a time only
    name = submit(alice, "team", ONE_TASK)
    backend.dispatch()
    first = f"{name}-main-group-main"
    sched.until(lambda: running(apiserver, namespace, [first]), what="first run")
    wait_for(lambda: (backend.listen() or True) and tasks_of(alice, name) == {
        "main": ("RUNNING", 0)}, what="RUNNING")
    cluster.finish(first, 3)
    wait_for(lambda: (backend.listen() or True) and tasks_of(alice, name) == {
        "main": ("SCHEDULING", 1)}, what="rescheduled")
    # The kubelet stand-in confirms the delete; then the new run is dispatched and placed.
    wait_for(lambda: backend.cleanup() >= 0 and backend.dispatch().applied == [
        f"{name}-main-group"], what="the rerun dispatched")
    second = f"{first}-r1"
    assert cluster.get("pods", first) is None
    sched.until(lambda: running(apiserver, namespace, [second]), what="second run")
    wait_for(lambda: (backend.listen() or True) and tasks_of(alice, name) == {
        "main": ("RUNNING", 1)}, what="RUNNING again")
    cluster.finish(second, 3)  # max_retries 1: this one is the last
    wait_for(lambda: (backend.listen() or True) and workflow(alice, name)["status"] ==
             "FAILED", what="FAILED")
    task = Task.objects.get(workflow__name=name)
    assert (task.status, task.retry_id, task.exit_code, task.reason) == (
        "FAILED", 1, 3, "retries_exhausted")


@pytest.fixture
def east(apiserver, k8s_settings, namespace, transactional_db, live_server, tmp_path):
    """Backend `east`, served by its agent process (as tests/kube_real/test_agent.py)."""
    install_agent_rbac(apiserver, namespace)
    backend_services.backend_upsert(name="east", kind="kubernetes", k8s_namespace=namespace)
    user = accounts.user_ensure(username="agent-east", groups=["osmo-backend-east"])
    agent = AgentProcess(url=live_server.url, token=accounts.token_issue(user=user),
                         name="east", kubeconfig=agent_kubeconfig(apiserver,
                                                                  tmp_path / "east.kubeconfig"),
                         log=tmp_path / "agent-east.log")
    yield agent
    agent.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(240)
def test_through_an_agent_the_earlier_run_is_gone_before_the_rerun_is_created(
        east, cluster, alice) -> None:
    cluster.add_node("east-n1", gpus=8)
    factories.pool("team", 64, backends=["east"], max_retries=2)
    east.start()
    wait_until(lambda: Node.objects.filter(backend="east").exists(), 30, "the node", east)
    name = submit(alice, "team", TWO_GROUPS)
    old = [f"{name}-train-lead", f"{name}-train-worker"]
    side = f"{name}-side-eval"
    wait_until(lambda: cluster.names("pods") == sorted([*old, side]), 30, "the pods", east)
    for pod in [*old, side]:
        cluster.run(pod, "east-n1")
    wait_until(lambda: tasks_of(alice, name) == {"lead": ("RUNNING", 0), "worker": ("RUNNING", 0),
                                                "eval": ("RUNNING", 0)}, 30, "RUNNING", east)
    first_side = cluster.get("pods", side)["metadata"]["uid"]

    cluster.finish(old[0], 3)
    wait_until(lambda: tasks_of(alice, name) == {
        "lead": ("SCHEDULING", 1), "worker": ("SCHEDULING", 1), "eval": ("RUNNING", 0)},
        30, "rescheduled", east)
    # The agent deletes the earlier run: the ended pod and the PodGroup go at once, the
    # running pod stays Terminating until its kubelet confirms (none here) — and meanwhile
    # nothing of the new run is created.
    wait_until(lambda: cluster.get("pods", old[0]) is None
               and cluster.get("podgroups", f"{name}-train") is None, 30, "deleted", east)
    worker = cluster.get("pods", old[1])
    assert worker is not None and worker["metadata"].get("deletionTimestamp"), (
        cluster.names("pods"), east.log_tail())
    time.sleep(3)  # a few of the agent's tries
    assert cluster.names("pods") == sorted([old[1], side])
    assert cluster.get("podgroups", f"{name}-train") is None
    assert tasks_of(alice, name) == {"lead": ("SCHEDULING", 1), "worker": ("SCHEDULING", 1),
                                     "eval": ("RUNNING", 0)}  # the old pod's going ends nothing

    cluster.delete_pod(old[1], final=True)  # the kubelet confirms
    new = [f"{name}-train-lead-r1", f"{name}-train-worker-r1"]
    wait_until(lambda: cluster.names("pods") == sorted([*new, side]), 30, "the rerun", east)
    assert retry_labels(cluster, "pods") == {new[0]: "1", new[1]: "1", side: "0"}
    assert retry_labels(cluster, "podgroups") == {f"{name}-train": "1", f"{name}-side": "0"}
    assert cluster.get("pods", side)["metadata"]["uid"] == first_side
    for pod in new:
        cluster.run(pod, "east-n1")
    wait_until(lambda: tasks_of(alice, name) == {"lead": ("RUNNING", 1), "worker": ("RUNNING", 1),
                                                "eval": ("RUNNING", 0)}, 30, "RUNNING again",
               east)
    cluster.finish(new[0], 0)
    cluster.finish(side, 0)
    wait_until(lambda: workflow(alice, name)["status"] == "COMPLETED", 30, "COMPLETED", east)
    body = workflow(alice, name)
    assert [(g["name"], g["retry_id"]) for g in body["groups"]] == [("train", 1), ("side", 0)]
    lead = Task.objects.get(workflow__name=name, name="lead")
    assert list(TaskEvent.objects.filter(task=lead).order_by("at", "id").values_list(
        "retry_id", "reason")) == [(0, "Bound"), (0, "Running"), (1, "Rescheduled"),
                                   (1, "Bound"), (1, "Running"), (1, "Completed")]
    # One read of the pods (a pod may go between two reads).
    wait_until(lambda: all(pod["metadata"].get("deletionTimestamp") for pod in cluster.server
                           .request("GET", cluster._path("pods"))["items"]), 30,
               "the ended groups' objects deleted", east)
