"""Pods' logs and Events into the task log and event store (``workflows.logstore``).

The web tier has no access to the API server (deploy/kubernetes/rbac.yaml), so the backend
copies: while someone reads a running task's log (a ``TaskLogInterest`` row the web renews), its
pod's new lines every pass; and when a pod ends — before the task's final status is written, so
the cleaner cannot delete the pod first — the rest of its log and its Events (kubelet,
scheduler). Reads go through ``pods/log`` with ``timestamps=true`` and ``sinceTime``, resuming
after the last line stored (``source_ns``); each read is bounded (``limitBytes``, the request
timeout) and the store keeps a task's newest ``OSMO_LOG_TASK_MAX_BYTES``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.utils import timezone

from scheduler.core.kai_names import retry_name, retry_of
from scheduler.kai.podgroups import pod_name
from workflows import logstore
from workflows.models import ALIVE_TASK_STATUSES, Task, TaskLogInterest, WorkflowKind

from .client import REQUEST_TIMEOUT, Kube, api_errors, call_raw, describe, raw, status_of
from .log_lines import STAMP, since_time, stamp_ns
from .objects import task_of_pod

logger = logging.getLogger(__name__)

READ_BYTES = 8 * 1024 * 1024  # one pods/log read
MAX_READS = 16  # reads of one pod per pass (a long log is taken in pieces, newest kept)


def lines_after(data: bytes, cursor: int, task_name: str) -> tuple[list[str], int]:
    """The task log's formatted lines of a ``pods/log`` read that are newer than ``cursor``,
    and the stamp of the last (``cursor`` when none)."""
    lines, last = [], cursor
    for line in data.decode("utf-8", "replace").splitlines():
        stamp = stamp_ns(line)
        if stamp is None or stamp[0] <= cursor:
            continue  # before the resume point (sinceTime has whole seconds)
        last = stamp[0]
        lines.append(logstore.format_line(stamp[1], task_name,
                                          line[STAMP.match(line).end():]))
    return lines, last


def task_events(items: list[dict], task: Task) -> list[logstore.Event]:
    """Kubernetes Events of a task's pod (the newest state of each) as the task's events."""
    events = []
    for event in items:
        stamp = event.get("lastTimestamp") or event.get("eventTime") or \
            event.get("firstTimestamp")
        at = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
        source = (event.get("source") or {}).get("component") or \
            event.get("reportingComponent") or ""
        count = event.get("count") or 1
        message = (event.get("message") or "").strip()
        message += f" ({source}{f', {count} times' if count > 1 else ''})" if source else ""
        events.append(logstore.Event(task.workflow_id, task.pk,
                                     str(event.get("reason") or "Event"), message, at,
                                     task.retry_id))
    return sorted(events, key=lambda e: e.at or timezone.now())


class PodLogs:
    def __init__(self, kube: Kube, *, namespace: str | None = None):
        self.kube = kube
        self.namespace = namespace or settings.OSMO_NAMESPACE

    def _read(self, pod: str, since_ns: int) -> bytes:
        query = [("timestamps", "true"), ("limitBytes", str(READ_BYTES))]
        if since_ns:
            query.append(("sinceTime", since_time(since_ns)))
        return call_raw(self.kube, "GET", f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log?"
                        + urlencode(query), accept="*/*")

    def copy(self, pod: str, task: Task) -> int:
        """Append the pod's lines newer than the task's stored ones; returns how many. A pod
        that is gone (404) or has no log yet (400: container not started) gives none."""
        cursor = logstore.log_cursor(task.pk, task.retry_id)
        copied = 0
        for _ in range(MAX_READS):
            try:
                data = self._read(pod, cursor)
            except api_errors() as exc:
                if status_of(exc) in (400, 404):
                    return copied
                raise
            lines, last = lines_after(data, cursor, task.name)
            if not lines:
                return copied
            logstore.log_append(task=task, text="".join(lines), source_ns=last)
            copied += len(lines)
            cursor = last
            if len(data) < READ_BYTES:
                return copied
        return copied

    def events(self, pod: str, task: Task) -> int:
        """The pod's Events (newest state of each), as the task's events."""
        body = raw(self.kube.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.kind=Pod,involvedObject.name={pod}",
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
        events = task_events(body.get("items") or [], task)
        logstore.events_record(events)
        return len(events)

    # --- the listener's call: a pod ended ------------------------------------------------
    def archive(self, pod: dict[str, Any]) -> None:
        """Keep an ending pod's log and Events (its task still alive: once per pod). A failed
        read is logged, never raised: the task's status must still be written."""
        key = task_of_pod(pod)
        if key is None:
            return
        task = Task.objects.filter(workflow__name=key[0], name=key[1],
                                   status__in=ALIVE_TASK_STATUSES,
                                   retry_id=retry_of(pod["metadata"])).first()
        if task is None:
            return  # ended, or a pod of an earlier run (kept when that run ended)
        name = pod["metadata"]["name"]
        try:
            self.copy(name, task)
            self.events(name, task)
        except api_errors() as exc:
            logger.warning("k8s backend: archiving the log of %s failed: %s", name,
                           describe(exc))

    # --- the leader's pass: live lines for readers -----------------------------------------
    def copy_wanted(self) -> int:
        """New lines of every running task someone reads; returns how many were copied."""
        copied = 0
        for task in tasks_read_live(group__dispatches__namespace=self.namespace):
            try:
                copied += self.copy(task_pod_name(task), task)
            except api_errors() as exc:
                logger.warning("k8s backend: reading the log of %s failed: %s", task,
                               describe(exc))
        return copied


def tasks_read_live(*, limit: int | None = None, **where: Any) -> list[Task]:
    """The running tasks (on a node) whose log someone reads now, of those ``where`` names
    (the first ``limit`` by id)."""
    tasks = (Task.objects.filter(
        pk__in=TaskLogInterest.objects.filter(until__gt=timezone.now()).values("task_id"),
        status__in=ALIVE_TASK_STATUSES, node_name__gt="", **where)
        .select_related("group", "workflow").distinct().order_by("pk"))
    return list(tasks[:limit] if limit is not None else tasks)


def task_pod_name(task: Task) -> str:
    """The pod of the task's current run."""
    if task.workflow.kind == WorkflowKind.WORKLOAD:
        return retry_name(task.name, task.retry_id)  # a workload's pods keep their names
    return retry_name(pod_name(task.group.podgroup, task.name), task.retry_id)
