"""Writes of the task log and event store, used by both cluster backends.

Logs: lines are kept in OSMO's format (``YYYY/MM/DD HH:MM:SS [task] text``, the format its
service and client filter on) in chunks of at most ``CHUNK_BYTES``; after an append the task's
oldest chunks go until it holds at most ``OSMO_LOG_TASK_MAX_BYTES`` (so the oldest lines are
dropped, a chunk at a time). Events: one row per thing that happened, in words.
Retention: :func:`purge` deletes both for workflows that ended ``OSMO_LOG_RETENTION_DAYS`` ago.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Sum
from django.utils import timezone

from .models import (
    ALIVE_TASK_STATUSES,
    Task,
    TaskEvent,
    TaskLogChunk,
    TaskLogInterest,
    Workflow,
    WorkflowGroup,
)

CHUNK_BYTES = 256 * 1024
MAX_LINE_BYTES = 16 * 1024  # a longer line is cut (a binary blob printed by mistake)


def log_time(at: datetime) -> str:
    """OSMO's log timestamp: naive UTC with slashes, to the second."""
    return at.astimezone(dt.UTC).strftime("%Y/%m/%d %H:%M:%S")


def format_line(at: datetime, task_name: str, text: str) -> str:
    text = text.replace("\r", "").replace("\n", " ")
    if len(text) > MAX_LINE_BYTES:
        text = text[:MAX_LINE_BYTES]
    return f"{log_time(at)} [{task_name}] {text}\n"


def _chunks(text: str) -> Iterable[tuple[str, int, int]]:
    """Split formatted text at line ends into (text, lines, bytes) of at most CHUNK_BYTES."""
    start = 0
    while start < len(text):
        end = min(len(text), start + CHUNK_BYTES)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut >= start else end
        piece = text[start:end]
        yield piece, piece.count("\n"), len(piece.encode("utf-8"))
        start = end


def log_append(*, task: Task, text: str, source_ns: int = 0) -> int:
    """Append already formatted lines (each ending in a newline) to a task's log, then trim
    it to its bound; returns how many chunks were written. ``source_ns``: where a read of the
    pod's log stopped (:func:`log_cursor` returns it)."""
    if not text:
        return 0
    chunks = [TaskLogChunk(workflow_id=task.workflow_id, task_id=task.pk, lines=lines,
                           size=size, text=piece, source_ns=source_ns, retry_id=task.retry_id)
              for piece, lines, size in _chunks(text)]
    TaskLogChunk.objects.bulk_create(chunks)
    _trim([task.pk])
    return len(chunks)


def log_append_lines(rows: Sequence[tuple[int, int, str] | tuple[int, int, str, int]]) -> int:
    """Many tasks' lines at once: ``(workflow_id, task_id, formatted line[, retry_id])``, one
    chunk per task and run (its lines in their order), in one statement (the embedded cluster
    writes lines for every running task); without a ``retry_id`` a line is of the task's
    current run. Lines come a few at a time and grow a log slowly: the hourly :func:`purge`
    trims these tasks to their bound. Returns how many lines were written."""
    if not rows:
        return 0
    chunks: dict[tuple[int, int, int | None], list[str]] = {}
    for workflow_id, task_id, line, *retry in rows:
        chunks.setdefault((workflow_id, task_id, retry[0] if retry else None), []).append(line)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO workflows_tasklogchunk (workflow_id, task_id, lines, size, text, "
            "source_ns, retry_id) SELECT w, t, n, octet_length(x), x, 0, "
            "COALESCE(r, task.retry_id) FROM unnest(%s::bigint[], %s::bigint[], %s::int[], "
            "%s::text[], %s::int[]) AS v(w, t, n, x, r) JOIN workflows_task task ON task.id = v.t",
            [[w for w, _, _ in chunks], [t for _, t, _ in chunks],
             [len(lines) for lines in chunks.values()],
             ["".join(lines) for lines in chunks.values()], [r for _, _, r in chunks]])
    return len(rows)


def log_cursor(task_id: int, retry_id: int = 0) -> int:
    """Where the last read of the task's pod log in run ``retry_id`` stopped (0: never
    read; each run is a pod of its own)."""
    return TaskLogChunk.objects.filter(task_id=task_id, retry_id=retry_id).aggregate(
        last=Max("source_ns"))["last"] or 0


def log_cursors(runs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """:func:`log_cursor` of many ``(task_id, retry_id)`` runs in one query (0: never read)."""
    runs = set(runs)
    if not runs:
        return {}
    rows = (TaskLogChunk.objects.filter(task_id__in={task for task, _ in runs})
            .values_list("task_id", "retry_id").annotate(last=Max("source_ns")).order_by())
    found = {(task, retry): last or 0 for task, retry, last in rows}
    return {run: found.get(run, 0) for run in runs}


LOG_INTEREST_SECONDS = 60


def log_wanted(task_ids: Iterable[int]) -> None:
    """Someone reads these running tasks' logs: the Kubernetes backend copies their new lines
    for the next LOG_INTEREST_SECONDS."""
    until = timezone.now() + timedelta(seconds=LOG_INTEREST_SECONDS)
    TaskLogInterest.objects.bulk_create(
        [TaskLogInterest(task_id=pk, until=until) for pk in task_ids],
        update_conflicts=True, unique_fields=["task"], update_fields=["until"])


def _trim(task_ids: Iterable[int]) -> None:
    """Drop each task's oldest chunks beyond OSMO_LOG_TASK_MAX_BYTES (newest kept)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM workflows_tasklogchunk c USING ("
            "  SELECT id FROM (SELECT id, sum(size) OVER (PARTITION BY task_id ORDER BY id DESC)"
            "  AS kept FROM workflows_tasklogchunk WHERE task_id = ANY(%s)) s WHERE kept > %s"
            ") old WHERE c.id = old.id",
            [list(task_ids), settings.OSMO_LOG_TASK_MAX_BYTES])


# --- events ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    workflow_id: int
    task_id: int | None
    reason: str
    message: str = ""
    at: datetime | None = None
    # The run of the task's group it is of; None: the task's current run (0 without a task).
    retry_id: int | None = None


def events_record(events: Sequence[Event]) -> None:
    """Store events (``at`` defaults to now) in one statement, in their order; an event
    without a ``retry_id`` takes its task's current run, read in the same statement."""
    if not events:
        return
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, message, "
            "retry_id) SELECT v.w, v.t, v.at, v.reason, v.message, "
            "COALESCE(v.retry, task.retry_id, 0) FROM unnest(%s::bigint[], %s::bigint[], "
            "%s::timestamptz[], %s::text[], %s::text[], %s::int[]) WITH ORDINALITY "
            "AS v(w, t, at, reason, message, retry, n) "
            "LEFT JOIN workflows_task task ON task.id = v.t ORDER BY v.n",
            [[e.workflow_id for e in events], [e.task_id for e in events],
             [e.at or now for e in events], [e.reason[:40] for e in events],
             [e.message[:1000] for e in events], [e.retry_id for e in events]])


def events_record_tasks(task_ids: Iterable[int], reason: str, message: str,
                        at: datetime | None = None) -> None:
    """The same event for several tasks (their workflow and run looked up in the same
    statement)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO workflows_taskevent (workflow_id, task_id, at, reason, message, "
            "retry_id) SELECT workflow_id, id, %s, %s, %s, retry_id FROM workflows_task "
            "WHERE id = ANY(%s)",
            [at or timezone.now(), reason[:40], message[:1000], list(task_ids)])


# --- retention -------------------------------------------------------------------------------

def purge(*, now: datetime | None = None, batch: int | None = None) -> tuple[int, int]:
    """Delete the logs and events of workflows that ended more than OSMO_LOG_RETENTION_DAYS
    ago, and trim the logs being written over their bound; returns (chunks, events) deleted.

    In batches of OSMO_LOG_PURGE_BATCH workflows, one short transaction each (a day of a busy
    history never holds its locks for minutes), read from the partial index of the ended
    workflows not purged yet: a pass never walks the purged history again."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.OSMO_LOG_RETENTION_DAYS)
    batch = batch or settings.OSMO_LOG_PURGE_BATCH
    TaskLogInterest.objects.filter(until__lt=cutoff).delete()
    chunks = events = 0
    while True:
        with transaction.atomic():
            ids = list(Workflow.objects.filter(logs_purged=False, finished_at__lt=cutoff)
                       .order_by("finished_at").values_list("pk", flat=True)[:batch])
            if not ids:
                break
            chunks += TaskLogChunk.objects.filter(workflow_id__in=ids).delete()[0]
            events += TaskEvent.objects.filter(workflow_id__in=ids).delete()[0]
            Workflow.objects.filter(pk__in=ids).update(logs_purged=True)
        if len(ids) < batch:
            break
    _trim(_over_bound(now))
    return chunks, events


def _over_bound(now: datetime) -> list[int]:
    """Tasks over OSMO_LOG_TASK_MAX_BYTES among those that may have been written since the last
    pass: of alive groups (their partial index) and of workflows ended within a day (the
    to-purge index), not the whole history. Two index reads, then the chunks of those
    workflows by their (workflow, id) index."""
    writing = set(WorkflowGroup.objects.filter(status__in=ALIVE_TASK_STATUSES)
                  .values_list("workflow_id", flat=True))
    writing.update(Workflow.objects.filter(logs_purged=False,
                                           finished_at__gte=now - timedelta(days=1))
                   .values_list("pk", flat=True))
    if not writing:
        return []
    return list(TaskLogChunk.objects.filter(workflow_id__in=writing)
                .values("task_id").annotate(total=Sum("size"))
                .filter(total__gt=settings.OSMO_LOG_TASK_MAX_BYTES)
                .values_list("task_id", flat=True))
