"""A workflow's logs, error logs and events (docs/API-OSMO-CLIENT.md "Logs and events"):
plain text in OSMO's line formats, visible to whoever can see the workflow (else 404)."""

from __future__ import annotations

import json
import time

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.views import APIView

from osmo.errors import NotFound
from osmo.streaming import client_gone, text_stream

from .. import logreads, logstore, ports
from ..models import Task, TaskStatus, Workflow
from . import log_serializers as s
from .views import _workflow

# OSMO keeps error logs for tasks that failed by themselves (not canceled, not evicted).
ERROR_LOG_STATUSES = (TaskStatus.FAILED, TaskStatus.FAILED_PREEMPTED)
ERROR_LOG_LINES = 100


def _task(workflow: Workflow, name: str | None, retry_id: int | None) -> Task | None:
    """The named task, with the run of its group asked for (it must have run, else 404)."""
    if name is None:
        return None
    task = Task.objects.filter(workflow=workflow, name=name).first()
    if task is None or (retry_id is not None and retry_id > task.retry_id):
        attempt = f" (retry {retry_id})" if retry_id else ""
        raise NotFound("task_not_found",
                       f"Workflow '{workflow.name}' has no task '{name}'{attempt}.")
    return task


def _live_copy(workflow: Workflow, task: Task | None, retry_id: int | None):
    """On Kubernetes, running pods' logs reach the store while someone reads them: a reader
    renews the backend's interest (at most every 20 s). None on the embedded cluster, and for
    an earlier run (it ended)."""
    selection = logreads.LogSelection(workflow, task, retry_id=retry_id)
    backends = set(workflow.groups.values_list("backend", flat=True))
    if selection.earlier_run or not ports.scheduling().logs_copied_live(backends):
        return None
    renewed = [0.0]

    def renew() -> None:
        if time.monotonic() - renewed[0] >= 20:
            renewed[0] = time.monotonic()
            logstore.log_wanted(selection.alive_bound_task_ids())

    return renew


def _target(request, name: str, serializer_class) -> tuple[Workflow, dict, Task | None]:
    """The visible workflow (else 404), the valid query, and the task it names (or None)."""
    workflow = _workflow(request, name)
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    data = query.validated_data
    return workflow, data, _task(workflow, data.get("task_name"), data.get("retry_id"))


def _pattern(query: dict):
    return logreads.compile_query(query["query"]) if query.get("query") else None


class WorkflowLogsView(APIView):
    @extend_schema(parameters=[s.LogsQuerySerializer], responses={(200, "text/plain"): str},
                   summary="The workflow's (or one task's) log, followed while it runs")
    def get(self, request, name: str):
        workflow, query, task = _target(request, name, s.LogsQuerySerializer)
        retry = query.get("retry_id") if task is not None else None
        selection = logreads.LogSelection(workflow, task, retry_id=retry,
                                          on_poll=_live_copy(workflow, task, retry))
        if selection.on_poll is not None:
            selection.on_poll()
        pattern = _pattern(query)
        follow = query.get("follow")
        if follow is None:
            follow = not query["download"] and selection.alive()
        follow = follow and not query["download"]
        chunks = logreads.log_stream(
            selection, last_n_lines=query.get("last_n_lines"), pattern=pattern, follow=follow,
            max_bytes=settings.OSMO_LOG_RESPONSE_MAX_BYTES,
            max_seconds=settings.OSMO_LOG_FOLLOW_SECONDS, gone=lambda: client_gone(request),
            announce=True)
        run = f"-retry-{retry}" if retry else ""
        filename = f"{workflow.name}{'-' + task.name if task else ''}{run}.log" \
            if query["download"] else None
        return text_stream(request, chunks, long=follow, filename=filename)


class WorkflowErrorLogsView(APIView):
    @extend_schema(parameters=[s.LogsQuerySerializer], responses={(200, "text/plain"): str},
                   summary="A failed task's last log lines; without a task, which tasks have "
                           "them")
    def get(self, request, name: str):
        workflow, query, task = _target(request, name, s.LogsQuerySerializer)
        if task is None:
            base = request.build_absolute_uri(f"/api/workflow/{workflow.name}/error_logs")
            table = {f"{t.name} retry-{t.retry_id}": (
                f"{base}?task_name={t.name}&retry_id={t.retry_id}"
                if t.status in ERROR_LOG_STATUSES else None)
                for t in Task.objects.filter(workflow=workflow).order_by("group__position",
                                                                         "position")}
            text = "Specify task for error logs.\n\n" + json.dumps(table, indent=4)
            return text_stream(request, iter([text.encode()]), long=False)
        lines = query.get("last_n_lines") or ERROR_LOG_LINES
        selection = logreads.LogSelection(workflow, task, retry_id=query.get("retry_id"))
        # An earlier run ended by an exit code its exit action rescheduled: an error of its own.
        failed = selection.earlier_run or task.status in ERROR_LOG_STATUSES
        chunks = iter(()) if not failed else logreads.log_stream(
            selection, last_n_lines=lines, pattern=_pattern(query),
            max_bytes=settings.OSMO_LOG_RESPONSE_MAX_BYTES, max_seconds=0)
        return text_stream(request, chunks, long=False)


class WorkflowEventsView(APIView):
    @extend_schema(parameters=[s.EventsQuerySerializer], responses={(200, "text/plain"): str},
                   summary="What happened to the workflow and its tasks, one line per event, "
                           "oldest first")
    def get(self, request, name: str):
        workflow, query, task = _target(request, name, s.EventsQuerySerializer)
        retry = query.get("retry_id") if task is not None else None

        def lines():
            for event in logreads.events_of(workflow, task, retry).iterator(chunk_size=1000):
                yield logreads.event_line(event, workflow.name).encode()

        return text_stream(request, lines(), long=False)

