"""KAI's unschedulable reasons on the Kubernetes backend (``OSMO_PLACEMENT=kai``): the
listener keeps each pending group's latest reasons on its ``GroupDispatch`` row
(:func:`group_reasons_record`), and the main loop publishes them as the cycle record
(:func:`pending_publish`), where ``explain`` and ``GET /api/scheduler/status`` read the
scheduler's. (With ``OSMO_PLACEMENT=osmo`` our scheduler's cycle publishes its own.)"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from pools.selectors import served_by_q
from scheduler.core.kai_names import DEFAULT_BACKEND, queue_name_for
from scheduler.cycle_figures import CycleRecord, PendingGang, waiting_words
from scheduler.cycle_record import cycle_record_write
from scheduler.models import GroupDispatch
from workflows import logstore
from workflows.models import Task, TaskStatus

from .kai_readiness import silent_groups, silent_reason

MAX_SILENT = 1000  # the record stays bounded when nothing schedules at all


def group_reasons_record(*, workflow_name: str, task_name: str,
                         reasons: list[dict[str, str]]) -> bool:
    """Keep KAI's latest unschedulable reasons on the task's group; True when they changed."""
    group_id = Task.objects.filter(workflow__name=workflow_name, name=task_name).values_list(
        "group_id", flat=True).first()
    if group_id is None:
        return False
    return GroupDispatch.objects.filter(group_id=group_id).exclude(reasons=reasons).update(
        reasons=reasons) > 0


def unschedulable_event(*, workflow_name: str, task_name: str,
                        reasons: list[dict[str, str]]) -> None:
    """The scheduler's reasons for a pending pod, as the task's event (when they change)."""
    task = Task.objects.filter(workflow__name=workflow_name, name=task_name).values_list(
        "id", "workflow_id").first()
    if task is not None:
        reason, message = waiting_words(reasons)
        logstore.events_record([logstore.Event(task[1], task[0], reason, message)])


def preempted_event(*, workflow_name: str, task_name: str, eviction) -> None:
    """Who took a preempted task's place, as KAI named it (its PodGroup), as a task event."""
    task = Task.objects.filter(workflow__name=workflow_name, name=task_name).values_list(
        "id", "workflow_id").first()
    if task is not None:
        by = f" for PodGroup {eviction.preemptor}" if eviction.preemptor else ""
        logstore.events_record([logstore.Event(task[1], task[0], "PreemptedBy",
                                               f"KAI {eviction.action}{by}")])


def _published_reasons(row: GroupDispatch, silent: set[int]) -> list[dict[str, str]]:
    if not row.applied_at and row.last_error:
        return [{"code": "dispatch_failed", "message": row.last_error}]
    if row.pk in silent:
        return [silent_reason()]
    return row.reasons


def pending_publish(*, previous: tuple | None = None, backend: str = DEFAULT_BACKEND,
                    now: datetime | None = None) -> tuple[PendingGang, ...]:
    """Write KAI's reasons of the still-pending groups where ``explain`` and
    ``GET /api/scheduler/status`` read the scheduler's: the ``SchedulerCycle`` row (on this
    backend the embedded loop never writes it). A group the cluster has not accepted yet shows
    the dispatch error instead (code ``dispatch_failed``), and one no scheduler has acted on
    (``kai_readiness.silent_groups``) says so (code ``scheduler_silent``): none waits without
    a word. Skipped when nothing changed since ``previous``; returns what is published. Only
    ``backend``'s groups, on its row."""
    silent = set(silent_groups(now).values_list("pk", flat=True)[:MAX_SILENT])
    rows = (GroupDispatch.objects.filter(group__status=TaskStatus.SCHEDULING,
                                         cleaned_at__isnull=True)
            .filter(~Q(reasons=[]) | Q(applied_at__isnull=True) & ~Q(last_error="")
                    | Q(pk__in=silent))
            .filter(served_by_q(backend, pool_field="group__workflow__pool"))
            .select_related("group__workflow__pool").order_by("pk"))
    pending = tuple(
        PendingGang(podgroup=row.group.podgroup, workflow=row.group.workflow.name,
                    group=row.group.name,
                    queue=queue_name_for(row.group.workflow.pool, row.namespace),
                    reasons=_published_reasons(row, silent))
        for row in rows)
    if pending != previous:
        cycle_record_write(CycleRecord(at=timezone.now(), duration_ms=0.0,
                                       pending_gangs=pending), backend=backend)
    return pending
