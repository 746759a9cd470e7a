"""Reads of the task log and event store: a log as a stream of bytes, bounded, and the events.

A user's ``query`` is a regular expression matched with RE2 (``google-re2``): linear in the
line, no backtracking. It is compiled without capturing groups (only "does the line match" is
asked, and captures would push RE2 off its DFA onto its slow engines: 400 nested empty groups
cost 80 times a plain pattern); a pattern whose program has more than ``QUERY_PROGRAM_SIZE``
instructions or whose automaton would need more than ``QUERY_MEMORY`` bytes is refused; and one
read matches for at most ``QUERY_SECONDS`` of CPU, then says so in a last line and ends. A line
is matched without its line ending, so ``$`` matches at its end.
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
    TaskStatus,
    Workflow,
    WorkflowStatus,
)

# A task not RUNNING yet that will: its log has no line of its own.
NOT_STARTED_TASK_STATUSES = (TaskStatus.WAITING, TaskStatus.SCHEDULING)

QUERY_MAX_CHARS = 512
QUERY_MEMORY = 1 << 20
QUERY_PROGRAM_SIZE = 2000
QUERY_SECONDS = 10.0
FOLLOW_POLL_SECONDS = 1.0


def compile_query(query: str) -> re2._Regexp:
    """The user's pattern, or 400 ``invalid_request`` (too long, not RE2 syntax, too big)."""
    if len(query) > QUERY_MAX_CHARS:
        raise RequestInvalid({"query": [f"At most {QUERY_MAX_CHARS} characters."]})
    options = re2.Options()
    options.max_mem = QUERY_MEMORY
    options.never_capture = True
    try:
        compiled = re2.compile(query, options)
    except re2.error as error:
        raise RequestInvalid({"query": [f"Not a valid regular expression (RE2): {error}"]}) \
            from error
    if compiled.programsize > QUERY_PROGRAM_SIZE:
        raise RequestInvalid({"query": [
            f"Too costly a regular expression: its RE2 program has {compiled.programsize} "
            f"instructions, at most {QUERY_PROGRAM_SIZE}."]})
    return compiled


class _Filter:
    """Keeps a text's lines that match ``pattern`` (each without its line ending), within a
    CPU budget for the whole read; ``spent`` turns true once it is used up."""

    def __init__(self, pattern, budget: float):
        self.pattern, self.budget, self.spent = pattern, budget, False

    def __call__(self, text: str) -> str:
        started = time.thread_time()
        search, kept = self.pattern.search, []
        for line in text.splitlines(keepends=True):
            if search(line.rstrip(_LINE_ENDS)):
                kept.append(line)
        self.budget -= time.thread_time() - started
        self.spent = self.budget <= 0
        return "".join(kept)


# What str.splitlines() ends a line with.
_LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True)
class LogSelection:
    """Which log to read: a workflow's (every task and run, in append order) or one task's
    in one run of its group (``retry_id``; None: its latest)."""

    workflow: Workflow
    task: Task | None = None
    # Called at every poll while following (the view keeps the backend copying live lines).
    on_poll: Callable[[], None] | None = None
    retry_id: int | None = None

    @property
    def earlier_run(self) -> bool:
        """An earlier run of the task's group is read: it ended, nothing more comes."""
        return self.task is not None and self.retry_id is not None and \
            self.retry_id < self.task.retry_id

    def chunks(self):
        if self.task is not None:
            retry = self.task.retry_id if self.retry_id is None else self.retry_id
            return TaskLogChunk.objects.filter(task_id=self.task.pk, retry_id=retry)
        return TaskLogChunk.objects.filter(workflow_id=self.workflow.pk)

    def alive_bound_task_ids(self, limit: int = 100) -> list[int]:
        tasks = Task.objects.filter(workflow_id=self.workflow.pk, status__in=ALIVE_TASK_STATUSES,
                                    node_name__gt="")
        if self.task is not None:
            tasks = tasks.filter(pk=self.task.pk)
        return list(tasks.values_list("id", flat=True)[:limit])

    def control_line(self, text: str) -> str:
        """A line of the service's own, as OSMO marks them: ``[source][osmo] text``."""
        source = self.task.name if self.task is not None else self.workflow.name
        at = dt.datetime.now(dt.UTC).strftime("%Y/%m/%d %H:%M:%S")
        return f"{at} [{source}][osmo] {text}\n"

    def not_started_line(self) -> bytes:
        """The line that says the task (or the workflow) has not started yet, or b""."""
        if self.earlier_run:
            return b""
        if self.task is not None:
            status = Task.objects.filter(pk=self.task.pk).values_list("status", flat=True).first()
            if status not in NOT_STARTED_TASK_STATUSES:
                return b""
            text = f"Task {self.task.name} has not started yet ({status})."
        else:
            status = Workflow.objects.filter(pk=self.workflow.pk).values_list(
                "status", flat=True).first()
            if status != WorkflowStatus.PENDING:
                return b""
            text = f"Workflow {self.workflow.name} has not started yet ({status})."
        return self.control_line(text).encode("utf-8")

    def alive(self) -> bool:
        if self.earlier_run:
            return False
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
               gone: Callable[[], bool] | None = None, announce: bool = False,
               query_seconds: float | None = None) -> Iterator[bytes]:
    """The log as bytes: with ``announce``, a line saying so if the task (or workflow) has
    not started, then
    everything (or the last ``last_n_lines`` lines), lines not matching ``pattern`` left out,
    then — with ``follow`` — new lines as they come while the task (or the workflow) is alive.
    Ends after ``max_bytes`` or ``max_seconds`` of following, when ``gone()`` says the reader
    left, or when matching ``pattern`` used up ``query_seconds`` of CPU.

    The first chunk comes at once — an empty one when there is nothing to send yet — because
    the server sends the status line and headers with the first chunk, not before."""
    started = time.monotonic()
    sent = 0
    after, skip = 0, 0
    if query_seconds is None:
        query_seconds = QUERY_SECONDS
    matching = _Filter(pattern, query_seconds) if pattern is not None else None
    if last_n_lines:
        first, skip = _first_chunk_of_tail(selection, last_n_lines)
        after = first - 1 if first else 0
    last_id = after
    first_pass = True
    notice = selection.not_started_line() if announce else b""
    if notice:
        sent = len(notice)
        yield notice
    while True:
        # Alive is asked BEFORE reading: lines written as the task ended are still sent.
        alive = follow and selection.alive()
        for pk, text in selection.chunks().filter(id__gt=last_id).order_by("id").values_list(
                "id", "text").iterator(chunk_size=8):
            last_id = pk
            if skip:
                text = "".join(text.splitlines(keepends=True)[skip:])
                skip = 0
            if matching is not None:
                text = matching(text)
                if matching.spent:
                    yield (text + selection.control_line(
                        f"The query used up its {query_seconds:g} s of matching; the rest of "
                        "the log is left out.")).encode("utf-8")[:max(0, max_bytes - sent)]
                    return
            if not text:
                continue
            data = text.encode("utf-8")
            if sent + len(data) > max_bytes:
                yield data[:max(0, max_bytes - sent)]
                return
            sent += len(data)
            yield data
        if first_pass and not sent:
            yield b""  # nothing yet: the headers go out now, not with the first line
        first_pass = False
        if not alive or time.monotonic() - started > max_seconds or (gone and gone()):
            return  # ended, out of time, or the reader went away
        if selection.on_poll is not None:
            selection.on_poll()
        if not connection.in_atomic_block:
            connection.close()  # a follower holds no database connection while it waits
        time.sleep(FOLLOW_POLL_SECONDS)
        yield b""  # sends nothing; the response's holder renews its lease meanwhile


def log_tail_text(selection: LogSelection, last_n_lines: int, *, max_bytes: int) -> str:
    """The last lines of a log as text (the error logs of a failed task)."""
    return b"".join(log_stream(selection, last_n_lines=last_n_lines, max_bytes=max_bytes,
                               max_seconds=0)).decode("utf-8", "replace")


# --- events ----------------------------------------------------------------------------------

def event_time(at) -> str:
    """OSMO's event timestamp: ``2025-01-02 03:04:05+00:00``."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S+00:00")


def events_of(workflow: Workflow, task: Task | None = None, retry_id: int | None = None):
    """Events oldest first; a task's include the workflow's own (``task`` null), one run's
    (``retry_id``) only that run's of the task (the workflow's own are of no run)."""
    events = TaskEvent.objects.filter(workflow_id=workflow.pk)
    if task is not None and retry_id is not None:
        events = events.filter(task_id=task.pk, retry_id=retry_id)
    elif task is not None:
        events = events.filter(Q(task_id=task.pk) | Q(task__isnull=True))
    return events.select_related("task").order_by("at", "id")


def event_source(event: TaskEvent, workflow_name: str) -> str:
    """Who an event is of: the workflow, a task, or a task's rerun as OSMO names a run
    (``{task} retry-{N}``; run 0 keeps the task's bare name)."""
    if not event.task_id:
        return workflow_name
    return f"{event.task.name} retry-{event.retry_id}" if event.retry_id else event.task.name


def event_line(event: TaskEvent, workflow_name: str) -> str:
    message = f"{event.reason}: {event.message}" if event.message else event.reason
    return f"{event_time(event.at)} [{event_source(event, workflow_name)}] {message}\n"
