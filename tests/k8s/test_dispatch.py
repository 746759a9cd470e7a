"""Submission path, the cases only the emulator can produce.

The real-API-server tier (tests/kube_real) shows PodGroups, pods, Services, Secrets and
workloads accepted by the real schemas and admission, and a foreign object's name clash. What
stays here needs the emulator's request log or injected answers: the exact order of writes and
that an idle pass makes no call at all, a retry after a lost answer creating nothing twice, a
409 Conflict from a concurrent writer, and a 422 / 403 on demand (admission now refuses what
a real server would answer 422 to)."""

from __future__ import annotations

import copy
import threading

import pytest
from django.utils import timezone

from pools.models import Pool
from scheduler.backends.default import default_backend_ensure
from scheduler.backends.kubernetes.dispatch import ClusterUnavailable, Dispatcher
from scheduler.kai.crd_validation import validate_manifest
from scheduler.models import Backend as BackendRow
from scheduler.models import GroupDispatch
from tests.shared_data import kai_crds
from workflows.models import WorkflowGroup

from .conftest import spec, statuses, strip_server_fields, submit

pytestmark = pytest.mark.django_db

QUEUE = "osmo-pool-osmo-team.shared"
OWNED = {"app.kubernetes.io/managed-by": "osmo", "osmo.retry": "0"}


def kai_manifests(client, name: str) -> list[dict]:
    response = client.get(f"/api/workflow/{name}/kai")
    assert response.status_code == 200
    return response.json()["manifests"]


def test_one_task_group_is_applied_exactly_as_kai_shows_it(backend, cluster, alice,
                                                           team) -> None:
    name = submit(alice, "team", spec("train", gpus=4))
    summary = backend.dispatch()
    assert summary.applied == [f"{name}-g"]
    expected = kai_manifests(alice, name)
    for manifest in expected:
        manifest["metadata"]["labels"] = {**manifest["metadata"]["labels"], **OWNED}
    podgroup = strip_server_fields(cluster.get("podgroups", f"{name}-g"))
    pod = strip_server_fields(cluster.get("pods", f"{name}-g-t0"))
    assert [podgroup, pod] == expected
    assert validate_manifest(podgroup, crds_dir=kai_crds()) == []
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == QUEUE
    assert pod["metadata"]["annotations"]["pod-group-name"] == f"{name}-g"
    assert pod["metadata"]["annotations"]["kai.scheduler/skip-podgrouper"] == "true"
    # The queue was missing: the whole hierarchy was synced before the PodGroup pointed at it.
    assert QUEUE in cluster.names("queues")
    writes = cluster.writes()
    assert writes.index(("POST", "queues", QUEUE)) < writes.index(("POST", "podgroups",
                                                                   f"{name}-g"))
    assert writes[-2:] == [("POST", "podgroups", f"{name}-g"), ("POST", "pods", f"{name}-g-t0")]
    for queue in cluster.names("queues"):
        assert validate_manifest(strip_server_fields(cluster.get("queues", queue)),
                                 crds_dir=kai_crds()) == []
    assert cluster.names("services") == [] and cluster.names("secrets") == []
    assert GroupDispatch.objects.get().applied_at is not None
    assert statuses(alice, name) == ("PENDING", ["SCHEDULING"])
    cluster.requests.clear()
    assert backend.dispatch().applied == []  # nothing runnable is left: no call at all
    assert cluster.requests == []


def test_a_retry_after_a_lost_answer_creates_nothing_twice(backend, cluster, alice,
                                                           team) -> None:
    name = submit(alice, "team", spec("retry", tasks=2))
    group = WorkflowGroup.objects.get(workflow__name=name)
    # The earlier attempt created everything, then crashed before recording it.
    backend.dispatcher.dispatch(group)
    before = {(kind, n): copy.deepcopy(cluster.get(kind, n))
              for kind in ("pods", "podgroups", "services") for n in cluster.names(kind)}
    cluster.requests.clear()
    assert backend.dispatch().applied == [f"{name}-g"]
    after = {(kind, n): cluster.get(kind, n)
             for kind in ("pods", "podgroups", "services") for n in cluster.names(kind)}
    assert after == before  # adopted as they were, same resourceVersions
    assert sorted(set(cluster.writes())) == sorted(
        {("POST", "services", f"{name}-g"), ("POST", "podgroups", f"{name}-g"),
         ("POST", "pods", f"{name}-g-t0"), ("POST", "pods", f"{name}-g-t1")})
    assert GroupDispatch.objects.get().applied_at is not None


def test_an_adopted_podgroup_with_a_stale_spec_is_replaced(backend, cluster, alice,
                                                           team) -> None:
    name = submit(alice, "team", spec("stale"))
    group = WorkflowGroup.objects.get(workflow__name=name)
    backend.dispatcher.dispatch(group)
    podgroup = cluster.get("podgroups", f"{name}-g")
    podgroup["spec"]["minMember"] = 7  # as an older attempt might have left it
    cluster._store("podgroups", "osmo", podgroup, "MODIFIED")
    cluster.fail_next("PUT", "podgroups", 409)  # a concurrent writer: re-read, retry
    backend.dispatch()
    assert cluster.get("podgroups", f"{name}-g")["spec"]["minMember"] == 1


def test_an_invalid_object_fails_the_group_and_a_forbidden_one_is_retried(
        backend, cluster, alice, team) -> None:
    bad = submit(alice, "team", spec("bad"))
    cluster.fail_next("POST", "podgroups", 422)
    assert backend.dispatch().failed == [f"{bad}-g"]
    assert statuses(alice, bad)[0] == "FAILED"

    later = submit(alice, "team", spec("later"))
    cluster.fail_next("POST", "pods", 403)
    assert backend.dispatch().deferred == [f"{later}-g"]
    row = GroupDispatch.objects.get(group__workflow__name=later)
    assert row.attempts == 1 and row.next_attempt_at is not None and "403" in row.last_error
    assert statuses(alice, later) == ("PENDING", ["SCHEDULING"])
    GroupDispatch.objects.filter(pk=row.pk).update(next_attempt_at=None)  # backoff elapsed
    assert backend.dispatch().applied == [f"{later}-g"]



def test_a_pass_parses_each_workflows_spec_once(backend, cluster, alice, team,
                                                monkeypatch) -> None:
    """The stored spec is parsed once per workflow in a pass — for its manifests and its
    groups' objects alike (a dispatch's largest cost was parsing it twice) — and once per
    text: a workflow submitted again from the same spec reuses the parse."""
    from scheduler.kai import workflow_manifests

    workflow_manifests.PARSED.clear()
    parsed = []
    parse = workflow_manifests.parse_workflow_spec
    monkeypatch.setattr(workflow_manifests, "parse_workflow_spec",
                        lambda text: parsed.append(text) or parse(text))
    names = [submit(alice, "team", spec(name, gpus=1)) for name in ("train", "eval", "train")]
    summary = backend.dispatch()
    assert sorted(summary.applied) == sorted(f"{name}-g" for name in names)
    assert sorted(document["workflow"]["name"] for document in parsed) == ["eval", "train"]


def test_a_backlog_is_prepared_while_the_previous_batch_is_created(backend, cluster, alice,
                                                                  team) -> None:
    """Batch n+1 is claimed and prepared while batch n's creates run, claims grow while they
    come back full, and no group is claimed twice (every object POSTed once)."""
    names = [submit(alice, "team", spec("train", gpus=1)) for _ in range(8)]
    dispatcher = Dispatcher(backend.kube, batch=2, max_batch=4, base_delay=0.0)
    claims: list[tuple[int, list[int]]] = []
    second_claim = threading.Event()
    first_batch = {group.pk for group in dispatcher.runnable(timezone.now())}
    runnable, apply = dispatcher.runnable, dispatcher.apply

    def claim(now, *, limit=None, exclude=()):
        claims.append((limit, sorted(exclude)))
        groups = list(runnable(now, limit=limit, exclude=exclude))
        if len(claims) == 2:
            second_claim.set()
        return groups

    def held_apply(obj):  # the first batch's creates wait until the next batch is claimed
        if obj["metadata"]["name"].rsplit("-g", 1)[0] in first_names:
            assert second_claim.wait(10), "the next batch was not claimed during the creates"
        apply(obj)

    first_names = {group.workflow.name for group in
                   WorkflowGroup.objects.filter(pk__in=first_batch).select_related("workflow")}
    dispatcher.runnable, dispatcher.apply = claim, held_apply
    summary = dispatcher.run(batches=10)
    assert sorted(summary.applied) == sorted(f"{name}-g" for name in names)
    assert summary.failed == [] and summary.deferred == []
    assert [limit for limit, _ in claims] == [2, 4, 4, 2]  # full: doubled (capped); 2 of 4: reset
    assert claims[1][1] == sorted(first_batch)  # in flight: not claimed again
    posts = [write for write in cluster.writes() if write[:2] in {("POST", "pods"),
                                                                   ("POST", "podgroups")}]
    assert sorted(posts) == sorted({*posts}) and len(posts) == 16
    assert GroupDispatch.objects.filter(applied_at__isnull=False).count() == 8


def test_a_failed_create_in_a_pipelined_pass_is_retried_and_nothing_twice(
        backend, cluster, alice, team) -> None:
    """A 503 on one pod ends the pass only after every started batch is recorded; the next
    pass creates that group's missing pod and nothing else."""
    names = [submit(alice, "team", spec("train", gpus=1)) for _ in range(4)]
    dispatcher = Dispatcher(backend.kube, batch=2, base_delay=0.0)
    cluster.fail_next("POST", "pods", 503, name=f"{names[1]}-g-t0")
    with pytest.raises(ClusterUnavailable):
        dispatcher.run(batches=10)
    applied = set(GroupDispatch.objects.filter(applied_at__isnull=False)
                  .values_list("group__workflow__name", flat=True))
    assert names[1] not in applied and {names[0]} <= applied
    cluster.requests.clear()
    summary = dispatcher.run(batches=10)
    assert sorted(summary.applied + [f"{name}-g" for name in applied]) == sorted(
        f"{name}-g" for name in names)
    assert ("POST", "pods", f"{names[1]}-g-t0") in cluster.writes()
    created = [write for write in cluster.writes() if write[0] == "POST"]
    assert len(created) == len(set(created))
    assert not any(write[2].startswith(tuple(applied)) for write in created)
    assert GroupDispatch.objects.filter(applied_at__isnull=False).count() == 4


def test_a_dispatched_group_names_the_backend_it_was_created_on(backend, cluster, alice,
                                                                team) -> None:
    name = submit(alice, "team", spec("train", gpus=4))
    assert [g["backend"] for g in alice.get(f"/api/workflow/{name}").json()["groups"]] == [None]
    assert backend.dispatch().applied == [f"{name}-g"]
    assert [g["backend"] for g in alice.get(f"/api/workflow/{name}").json()["groups"]] == [
        "default"]
    assert WorkflowGroup.objects.get().backend == "default"


def test_dispatch_claims_only_the_groups_of_pools_that_name_its_backend(backend, cluster,
                                                                        alice, team) -> None:
    BackendRow.objects.create(name="other", kind="kubernetes")
    Pool.objects.filter(name="team").update(backends=["other"])
    name = submit(alice, "team", spec("elsewhere"))
    writes = cluster.writes()
    assert backend.dispatch().applied == []  # `other`'s process takes it, not this one
    assert cluster.writes() == writes
    assert not GroupDispatch.objects.exists()
    Pool.objects.filter(name="team").update(backends=["other", "default"])
    assert backend.dispatch().applied == [f"{name}-g"]
    assert WorkflowGroup.objects.get().backend == "default"


def test_a_backend_under_maintenance_is_dispatched_nothing(backend, cluster, alice,
                                                           team) -> None:
    default_backend_ensure()
    BackendRow.objects.filter(name="default").update(maintenance=True)
    name = submit(alice, "team", spec("held"))
    writes = cluster.writes()
    assert backend.dispatch().applied == []
    assert cluster.writes() == writes
    assert WorkflowGroup.objects.get().backend is None
    BackendRow.objects.filter(name="default").update(maintenance=False)
    assert backend.dispatch().applied == [f"{name}-g"]
