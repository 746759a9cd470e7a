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
from django.db.models import Exists, OuterRef, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

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
from ..kubernetes.objects import group_objects, group_selector
from . import metrics

logger = logging.getLogger(__name__)

PODS_PER_ITEM = 100  # a 1,000-task group is 11 items of a few hundred KiB each
CLAIM_BATCH = 50  # groups claimed in one transaction
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
        for group in groups:
            objects = group_objects(group.workflow, group)
            for pod in objects.pods:
                if backend.scheduler_name:
                    pod["spec"]["schedulerName"] = backend.scheduler_name
            head = [*objects.secrets, *([objects.service] if objects.service else []),
                    objects.podgroup]
            chunks = [head] + [objects.pods[i:i + PODS_PER_ITEM]
                               for i in range(0, len(objects.pods), PODS_PER_ITEM)]
            items += [AgentWork(backend=backend.name, kind=AgentWorkKind.CREATE, group=group,
                                payload={"podgroup": group.podgroup, "objects": chunk})
                      for chunk in chunks]
            claimed += 1
        GroupDispatch.objects.bulk_create(
            [GroupDispatch(group=group, namespace=backend.k8s_namespace) for group in groups])
        AgentWork.objects.bulk_create(items)
    logger.info("agent %s: claimed %d group(s)", backend.name, claimed)
    return claimed


def queue_cleanups(backend: Backend, *, limit: int = CLAIM_BATCH) -> int:
    """Queue the deletion of the objects of this backend's groups that ended."""
    with transaction.atomic():
        pending = AgentWork.objects.filter(group=OuterRef("group_id"), kind=AgentWorkKind.DELETE)
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
                     **({"releases": held[group.pk]} if group.pk in held else {})})
            for group in groups])
        GroupDispatch.objects.filter(group_id__in=group_ids).exclude(
            pk__in=list(held.values())).delete()
    if groups:
        logger.info("agent %s: %d moved group(s) fenced", backend_name, len(groups))
    return len(groups)


def release_held(backend_names: list[str]) -> int:
    """The dispatch records held by these (OFFLINE) backends' unacked fences go: their groups
    are claimed elsewhere at once, and the fences stay first in line for a returning agent."""
    if not backend_names:
        return 0
    held = AgentWork.objects.filter(backend__in=backend_names, kind=AgentWorkKind.DELETE,
                                    acked_at__isnull=True, payload__has_key="releases")
    return GroupDispatch.objects.filter(
        pk__in=list(held.values_list("payload__releases", flat=True))).delete()[0]


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
    done: list[int] = []
    with transaction.atomic():
        items = list(AgentWork.objects.filter(backend=backend.name, pk__in=list(by_id),
                                              acked_at__isnull=True)
                     .select_for_update().only("pk", "kind", "group_id"))
        for item in items:
            AgentWork.objects.filter(pk=item.pk).update(acked_at=now, outcome=by_id[item.pk])
            done.append(item.pk)
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
        cleaned = [item.group_id for item in items if item.kind == AgentWorkKind.DELETE]
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
