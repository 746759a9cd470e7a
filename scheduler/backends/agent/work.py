"""A backend's work queue: what its agent is to do on its cluster, persisted with ids.

- **create**: a runnable group of a pool that names the backend is claimed (its
  ``GroupDispatch`` row, unique per group, written in the same transaction, so a group is
  claimed once whoever else looks) and its objects — built by the dispatcher's own
  ``group_objects`` — become work items in create order: the Secrets, Service and PodGroup in
  the first, the pods ``PODS_PER_ITEM`` at a time after it, so no item grows with the
  workflow. The group counts as applied (``applied_at``, ``WorkflowGroup.backend``) once
  every item of it is acked.
- **delete**: a group that ended (or whose workflow did) has its objects deleted by label;
  acked → ``cleaned_at``.
- **rerun**: a group an exit action runs again (its ``retry_id`` above its dispatch row's)
  gets a delete of its earlier run's objects (by the run's label, ``until_gone``: the agent
  acks it only once nothing of that run is left, a terminating pod included) and, after it,
  the new run's creates (pods named ``{pod}-r{N}``); the agent applies items in id order and
  stops at one not done, so a rerun's pods never overlap their predecessors.
- **sync**: the whole desired set of Queues and the Topology, queued when it differs from
  the last one queued (and at every register, so a reconnected cluster converges).

An item is handed out on every poll until it is acked; a new agent connection gets every
unacked item again, in id order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

import orjson
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from scheduler.batch_reads import one_batch
from scheduler.kai.selectors import desired_cluster_objects
from scheduler.models import AgentWork, AgentWorkKind, Backend, GroupDispatch
from workflows import lifecycle
from workflows.models import (
    ALIVE_WORKFLOW_STATUSES,
    FINAL_TASK_STATUSES,
    TaskStatus,
    WorkflowGroup,
)

from ..destined import destined_q
from ..kubernetes.objects import earlier_runs_selector, group_objects, group_selector
from . import metrics

logger = logging.getLogger(__name__)

PODS_PER_ITEM = 100  # a 1,000-task group is 11 items of a few hundred KiB each
CLAIM_BATCH = 100  # groups claimed in one transaction (one-pod groups: a poll answer)
POLL_ITEMS = 200  # items in one poll answer at most
POLL_BYTES = 8 * 1024 * 1024  # and about this many bytes (one item always goes)
MOVED = "moved"  # the outcome of a create whose group was taken to another backend


def claim_groups(backend: Backend, *, limit: int = CLAIM_BATCH) -> int:
    """Claim up to ``limit`` runnable groups for ``backend`` and queue their creates;
    returns how many were claimed."""
    if backend.maintenance:
        return 0
    claimed = 0
    with transaction.atomic():
        dispatched = GroupDispatch.objects.filter(group=OuterRef("pk"))
        groups = list(WorkflowGroup.objects
                      .filter(status=TaskStatus.SCHEDULING,
                              workflow__status__in=ALIVE_WORKFLOW_STATUSES)
                      .filter(destined_q(backend.name), ~Exists(dispatched))
                      .select_related("workflow__pool")
                      .order_by("workflow__submitted_at", "workflow_id", "position")
                      .select_for_update(skip_locked=True, of=("self",))[:limit])
        if not groups:
            return 0
        items: list[AgentWork] = []
        with one_batch():
            for group in groups:
                items += _creates(backend, group)
                claimed += 1
        GroupDispatch.objects.bulk_create(
            # The run it is created at: a group rescheduled before it came here (a lost
            # cluster's) is not queued to run again once more.
            [GroupDispatch(group=group, namespace=backend.k8s_namespace,
                           retry_id=group.retry_id) for group in groups])
        AgentWork.objects.bulk_create(items)
    logger.info("agent %s: claimed %d group(s)", backend.name, claimed)
    return claimed


def _creates(backend: Backend, group: WorkflowGroup) -> list[AgentWork]:
    """The create items of the group's current run, in create order."""
    objects = group_objects(group.workflow, group)
    for pod in objects.pods:
        if backend.scheduler_name:
            pod["spec"]["schedulerName"] = backend.scheduler_name
    head = [*objects.secrets, *([objects.service] if objects.service else []),
            objects.podgroup]
    chunks = [head] + [objects.pods[i:i + PODS_PER_ITEM]
                       for i in range(0, len(objects.pods), PODS_PER_ITEM)]
    return [AgentWork(backend=backend.name, kind=AgentWorkKind.CREATE, group=group,
                      payload={"podgroup": group.podgroup, "objects": chunk})
            for chunk in chunks]


def queue_reruns(backend: Backend, *, limit: int = CLAIM_BATCH) -> int:
    """Groups of this backend an exit action runs again: the delete of their earlier run's
    objects, then their new run's creates; the dispatch row records the new run at once (so
    it is queued once) and is applied again when the creates are acked. Returns how many."""
    if backend.maintenance:
        return 0
    with transaction.atomic():
        rows = list(GroupDispatch.objects
                    .filter(cleaned_at__isnull=True, group__backend=backend.name,
                            retry_id__lt=F("group__retry_id"),
                            group__status=TaskStatus.SCHEDULING,
                            group__workflow__status__in=ALIVE_WORKFLOW_STATUSES)
                    .select_related("group__workflow__pool")
                    .select_for_update(skip_locked=True, of=("self",))
                    .order_by("pk")[:limit])
        items: list[AgentWork] = []
        for row in rows:
            group = row.group
            items.append(AgentWork(
                backend=backend.name, kind=AgentWorkKind.DELETE, group=group,
                payload={"podgroup": group.podgroup, "retry": group.retry_id,
                         "until_gone": True,
                         "selector": earlier_runs_selector(group.workflow.name, group.name,
                                                           group.retry_id)}))
            items += _creates(backend, group)
            GroupDispatch.objects.filter(pk=row.pk).update(
                retry_id=group.retry_id, applied_at=None, last_error="", reasons=[])
        AgentWork.objects.bulk_create(items)
    if rows:
        logger.info("agent %s: %d group(s) queued to run again", backend.name, len(rows))
    return len(rows)


def queue_cleanups(backend: Backend, *, limit: int = CLAIM_BATCH) -> int:
    """Queue the deletion of the objects of this backend's groups that ended."""
    with transaction.atomic():
        # A rerun's delete of an earlier run is no cleanup of the group.
        pending = AgentWork.objects.filter(group=OuterRef("group_id"), kind=AgentWorkKind.DELETE
                                           ).exclude(payload__has_key="retry")
        rows = list(GroupDispatch.objects
                    .filter(cleaned_at__isnull=True, group__backend=backend.name)
                    .filter(Q(group__status__in=FINAL_TASK_STATUSES)
                            | ~Q(group__workflow__status__in=ALIVE_WORKFLOW_STATUSES))
                    .filter(~Exists(pending))
                    .select_related("group__workflow")
                    .select_for_update(skip_locked=True, of=("self",))
                    .order_by("pk")[:limit])
        AgentWork.objects.bulk_create([AgentWork(
            backend=backend.name, kind=AgentWorkKind.DELETE, group=row.group,
            payload={"podgroup": row.group.podgroup,
                     "selector": group_selector(row.group.workflow.name, row.group.name)})
            for row in rows])
    return len(rows)


def queue_sync(backend: Backend, *, force: bool = False) -> bool:
    """Queue the desired Queues and Topology when they differ from the last queued (or
    ``force``: a reconnect, whose cluster may have lost them)."""
    desired = desired_cluster_objects(namespace=backend.k8s_namespace, backend=backend.name)
    last = (AgentWork.objects.filter(backend=backend.name, kind=AgentWorkKind.SYNC)
            .order_by("-pk").values_list("payload", flat=True).first())
    if not force and last is not None and last.get("objects") == desired:
        return False
    with transaction.atomic():
        # An older sync still unacked is superseded: the new one is the whole set.
        AgentWork.objects.filter(backend=backend.name, kind=AgentWorkKind.SYNC,
                                 acked_at__isnull=True).update(acked_at=timezone.now(),
                                                               outcome="superseded")
        AgentWork.objects.create(backend=backend.name, kind=AgentWorkKind.SYNC,
                                 payload={"objects": desired})
    return True


def fence_moved(backend_name: str, group_ids: list[int], *, hold: bool = False) -> int:
    """Groups taken away from ``backend_name`` (OFFLINE, or moved to another backend) before
    any of their pods ran: their unacked creates there are never handed out, their objects
    there are queued for deletion as fences — while one is unacked the agent is given
    nothing else (:func:`unacked`), so a returning cluster deletes moved work before it
    starts anything —, and their dispatch record goes so that the next backend claims them.
    ``hold`` (the source is ONLINE: a move): a fenced group's record goes only when the fence
    is acked (:func:`ack`), so the next backend creates nothing while its objects may still
    be placed there — a gang is never in two clusters at once. Returns the fences queued."""
    if not group_ids:
        return 0
    now = timezone.now()
    with transaction.atomic():
        sent = set(AgentWork.objects.filter(backend=backend_name, kind=AgentWorkKind.CREATE,
                                            group_id__in=group_ids)
                   .values_list("group_id", flat=True))
        # Every create of theirs there says so: the agent's reports about them count no more
        # (agent.pods), and the unacked ones are not handed out again.
        AgentWork.objects.filter(backend=backend_name, kind=AgentWorkKind.CREATE,
                                 group_id__in=group_ids).update(
            acked_at=Coalesce("acked_at", Value(now)), outcome=MOVED)
        groups = list(WorkflowGroup.objects.filter(pk__in=sorted(sent))
                      .select_related("workflow"))
        held = dict(GroupDispatch.objects.filter(group_id__in=sent).values_list(
            "group_id", "pk")) if hold else {}
        AgentWork.objects.bulk_create([AgentWork(
            backend=backend_name, kind=AgentWorkKind.DELETE, group=group,
            payload={"podgroup": group.podgroup, "fence": True,
                     "selector": group_selector(group.workflow.name, group.name),
                     # Held: acked once nothing of it is left there (a pod bound meanwhile
                     # may be terminating), only then created on the other cluster.
                     **({"releases": held[group.pk], "until_gone": True}
                        if group.pk in held else {})})
            for group in groups])
        GroupDispatch.objects.filter(group_id__in=group_ids).exclude(
            pk__in=list(held.values())).delete()
    if groups:
        logger.info("agent %s: %d moved group(s) fenced", backend_name, len(groups))
    return len(groups)


def holding_fences(backend_names: list[str]):
    """These backends' unacked fences that hold a moved group's dispatch record."""
    return AgentWork.objects.filter(backend__in=backend_names, kind=AgentWorkKind.DELETE,
                                    acked_at__isnull=True, payload__has_key="releases")


def release_held(backend_names: list[str]) -> int:
    """The dispatch records held by these (OFFLINE) backends' unacked fences go: their groups
    are claimed elsewhere at once, and the fences stay first in line for a returning agent."""
    if not backend_names:
        return 0
    return GroupDispatch.objects.filter(pk__in=list(holding_fences(backend_names).values_list(
        "payload__releases", flat=True))).delete()[0]


def unacked(backend: Backend, *, after: int = 0) -> list[dict]:
    """The unacked items after id ``after``, oldest first, bounded by count and bytes; only
    the fences while one is unacked (see :func:`fence_moved`)."""
    out, size = [], 0
    items = AgentWork.objects.filter(backend=backend.name, acked_at__isnull=True, pk__gt=after)
    fences = items.filter(kind=AgentWorkKind.DELETE, payload__fence=True)
    if fences.exists():
        items = fences
    for item in items.order_by("pk").values("pk", "kind", "payload")[:POLL_ITEMS]:
        entry = {"id": item["pk"], "kind": item["kind"], "payload": item["payload"]}
        size += len(orjson.dumps(entry))
        if out and size > POLL_BYTES:
            break
        out.append(entry)
    return out


def ack(backend: Backend, acks: Iterable[dict]) -> list[int]:
    """Record the agent's acks ({id, error}); returns the ids newly acked. A create's group
    is applied once all of its items are; a delete's group is cleaned."""
    by_id = {int(a["id"]): (a.get("error") or "")[:2000] for a in acks}
    if not by_id:
        return []
    now = timezone.now()
    with transaction.atomic():
        items = list(AgentWork.objects.filter(backend=backend.name, pk__in=list(by_id),
                                              acked_at__isnull=True)
                     .select_for_update().only("pk", "kind", "group_id"))
        done = [item.pk for item in items]
        for outcome in set(by_id[pk] for pk in done):  # one statement per outcome, not per item
            AgentWork.objects.filter(pk__in=[pk for pk in done if by_id[pk] == outcome]).update(
                acked_at=now, outcome=outcome)
        # An error is an answer that can never succeed (400, 422, a name taken by another
        # object): the group fails as a refused submission does. Transient ones are not acked.
        failed = {item.group_id: by_id[item.pk] for item in items
                  if item.kind == AgentWorkKind.CREATE and by_id[item.pk]}
        created = {item.group_id for item in items
                   if item.kind == AgentWorkKind.CREATE} - set(failed)
        if created:
            open_groups = set(AgentWork.objects.filter(
                group_id__in=created, kind=AgentWorkKind.CREATE, acked_at__isnull=True)
                .values_list("group_id", flat=True))
            applied = sorted(created - open_groups)
            GroupDispatch.objects.filter(group_id__in=applied, applied_at__isnull=True).update(
                applied_at=now, last_error="")
            lifecycle.groups_dispatched(applied, backend.name)
            metrics.record_dispatched(backend.name, [
                (now - submitted).total_seconds() for submitted in WorkflowGroup.objects
                .filter(pk__in=applied).values_list("workflow__submitted_at", flat=True)])
        for group_id, error in failed.items():
            GroupDispatch.objects.filter(group_id=group_id).update(last_error=error)
            lifecycle.group_fail_submission(group_id=group_id)
        deletes = [item.pk for item in items if item.kind == AgentWorkKind.DELETE]
        # A rerun's delete of the earlier run leaves the group's current run in place.
        reruns = set(AgentWork.objects.filter(pk__in=deletes, payload__has_key="retry")
                     .values_list("pk", flat=True)) if deletes else set()
        cleaned = [item.group_id for item in items
                   if item.kind == AgentWorkKind.DELETE and item.pk not in reruns]
        if deletes:  # a create's payload (pods) is never read back here
            # A moved group's objects are gone here: the backend it moved to may create them.
            GroupDispatch.objects.filter(pk__in=list(AgentWork.objects.filter(
                pk__in=deletes, payload__has_key="releases").values_list(
                "payload__releases", flat=True))).delete()
        # A group that moved to another backend keeps its new dispatch as it is.
        GroupDispatch.objects.filter(group_id__in=cleaned, group__backend=backend.name).update(
            cleaned_at=now)
    return done


def applied_before_listing(work_id: int, session: datetime | None) -> Exists:
    """Whether a group has a create item the agent may not have applied when it listed: one
    not acked, or acked after this agent's connection began (``session``) with an id above
    ``work_id`` (the highest it had applied in this connection before the LIST). An item acked
    before the connection began was applied before this agent process even listed."""
    later = Q(acked_at__isnull=True) | Q(pk__gt=work_id) & (
        Q(acked_at__gte=session) if session is not None else Q())
    return Exists(AgentWork.objects.filter(later, group=OuterRef("group_id"),
                                           kind=AgentWorkKind.CREATE))
