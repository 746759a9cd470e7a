"""Reads of the task log and event store: a log as a stream of bytes, bounded, and the events.

A user's ``query`` is a regular expression matched with RE2 (``google-re2``): linear in the
line, no backtracking, and a pattern whose automaton would need more than ``QUERY_MEMORY``
bytes is refused, so a hostile pattern costs no more than a plain one.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import re2
from django.db import connection
from django.db.models import Q

from osmo.errors import RequestInvalid

from .models import (
    ALIVE_TASK_STATUSES,
    ALIVE_WORKFLOW_STATUSES,
    Task,
    TaskEvent,
    TaskLogChunk,
    Workflow,
)

QUERY_MAX_CHARS = 512
QUERY_MEMORY = 1 << 20
FOLLOW_POLL_SECONDS = 1.0


def compile_query(query: str) -> re2._Regexp:
    """The user's pattern, or 400 ``invalid_request`` (too long, not RE2 syntax, too big)."""
    if len(query) > QUERY_MAX_CHARS:
        raise RequestInvalid({"query": [f"At most {QUERY_MAX_CHARS} characters."]})
    options = re2.Options()
    options.max_mem = QUERY_MEMORY
    try:
        return re2.compile(query, options)
    except re2.error as error:
        raise RequestInvalid({"query": [f"Not a valid regular expression (RE2): {error}"]}) \
            from error


@dataclass(frozen=True)
class LogSelection:
    """Which log to read: a workflow's (every task, in append order) or one task's."""

    workflow: Workflow
    task: Task | None = None
    # Called at every poll while following (the view keeps the backend copying live lines).
    on_poll: Callable[[], None] | None = None

    def chunks(self):
        if self.task is not None:
            return TaskLogChunk.objects.filter(task_id=self.task.pk)
        return TaskLogChunk.objects.filter(workflow_id=self.workflow.pk)

    def alive_bound_task_ids(self, limit: int = 100) -> list[int]:
        tasks = Task.objects.filter(workflow_id=self.workflow.pk, status__in=ALIVE_TASK_STATUSES,
                                    node_name__gt="")
        if self.task is not None:
            tasks = tasks.filter(pk=self.task.pk)
        return list(tasks.values_list("id", flat=True)[:limit])

    def alive(self) -> bool:
        if self.task is not None:
            return Task.objects.filter(pk=self.task.pk, status__in=ALIVE_TASK_STATUSES).exists()
        return Workflow.objects.filter(pk=self.workflow.pk,
                                       status__in=ALIVE_WORKFLOW_STATUSES).exists()


def _first_chunk_of_tail(selection: LogSelection, last_n: int) -> tuple[int, int]:
    """(id of the oldest chunk holding the last ``last_n`` lines, lines to skip in it)."""
    seen = 0
    for pk, lines in selection.chunks().order_by("-id").values_list("id", "lines").iterator(
            chunk_size=2000):
        seen += lines
        if seen >= last_n:
            return pk, seen - last_n
    return 0, 0


def log_stream(selection: LogSelection, *, last_n_lines: int | None = None,
               pattern=None, follow: bool = False, max_bytes: int, max_seconds: float,
               gone: Callable[[], bool] | None = None) -> Iterator[bytes]:
    """The log as bytes: everything (or the last ``last_n_lines`` lines), lines not matching
    ``pattern`` left out, then — with ``follow`` — new lines as they come while the task (or
    the workflow) is alive. Ends after ``max_bytes`` or ``max_seconds`` of following, or when
    ``gone()`` says the reader left."""
    started = time.monotonic()
    sent = 0
    after, skip = 0, 0
    if last_n_lines:
        first, skip = _first_chunk_of_tail(selection, last_n_lines)
        after = first - 1 if first else 0
    last_id = after
    while True:
        # Alive is asked BEFORE reading: lines written as the task ended are still sent.
        alive = follow and selection.alive()
        for pk, text in selection.chunks().filter(id__gt=last_id).order_by("id").values_list(
                "id", "text").iterator(chunk_size=8):
            last_id = pk
            if skip:
                text = "".join(text.splitlines(keepends=True)[skip:])
                skip = 0
            if pattern is not None:
                text = "".join(line for line in text.splitlines(keepends=True)
                               if pattern.search(line))
            if not text:
                continue
            data = text.encode("utf-8")
            if sent + len(data) > max_bytes:
                yield data[:max(0, max_bytes - sent)]
                return
            sent += len(data)
            yield data
        if not alive or time.monotonic() - started > max_seconds or (gone and gone()):
            return  # ended, out of time, or the reader went away
        if selection.on_poll is not None:
            selection.on_poll()
        if not connection.in_atomic_block:
            connection.close()  # a follower holds no database connection while it waits
        time.sleep(FOLLOW_POLL_SECONDS)


def log_tail_text(selection: LogSelection, last_n_lines: int, *, max_bytes: int) -> str:
    """The last lines of a log as text (the error logs of a failed task)."""
    return b"".join(log_stream(selection, last_n_lines=last_n_lines, max_bytes=max_bytes,
                               max_seconds=0)).decode("utf-8", "replace")


# --- events ----------------------------------------------------------------------------------

def event_time(at) -> str:
    """OSMO's event timestamp: ``2025-01-02 03:04:05+00:00``."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S+00:00")


def events_of(workflow: Workflow, task: Task | None = None):
    """Events oldest first; a task's include the workflow's own (``task`` null)."""
    events = TaskEvent.objects.filter(workflow_id=workflow.pk)
    if task is not None:
        events = events.filter(Q(task_id=task.pk) | Q(task__isnull=True))
    return events.select_related("task").order_by("at", "id")


def event_line(event: TaskEvent, workflow_name: str) -> str:
    source = event.task.name if event.task_id else workflow_name
    message = f"{event.reason}: {event.message}" if event.message else event.reason
    return f"{event_time(event.at)} [{source}] {message}\n"
