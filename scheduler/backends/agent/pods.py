"""Pods an agent reports → task statuses, by the in-process listener's own path
(:class:`~scheduler.backends.kubernetes.listener.PodListener.handle_batch`: the pure mapping
of ``status.py`` into ``workflows.lifecycle``), with what the listener would ask its cluster
for answered from the agent's messages instead:

- a moved or released pod's replacement is queued as create work (the listener creates it);
- KAI's eviction of a deleted pod is read from the PodGroup's Events the agent attaches to
  the pod (``events``), as the listener reads them;
- an ending pod's log and Events come in ``pod_logs`` messages the agent puts before the
  pod's status (:meth:`AgentPods.archived`), so the listener's own archive has nothing to
  read here.

A re-list (``pods_listed``) ends the alive tasks of this backend's applied groups whose pod
is not in it, as the listener's re-list does: only groups whose every create the agent had
applied before it listed (``applied_through``: the highest work id it had applied in this
connection, ``session``: when the connection began — what was acked before was applied by an
earlier agent process).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q

from scheduler.models import AgentWork, AgentWorkKind, Backend
from workflows import lifecycle, logstore
from workflows.models import ALIVE_TASK_STATUSES, Task

from ..kubernetes import moves, pod_logs, status
from ..kubernetes.listener import PodListener
from ..kubernetes.objects import task_of_pod
from ..spec import spec_of
from .work import MOVED, applied_before_listing

logger = logging.getLogger(__name__)

MAX_POD_EVENTS = 100  # of one pod, in one message


class _NoLogs:
    """The agent's ``pod_logs`` messages came first (see the module's docstring)."""

    def archive(self, pod: dict[str, Any]) -> None:
        return None


class AgentPods(PodListener):
    def __init__(self, backend: Backend):
        # Its own spec: with `placement: osmo` our scheduler publishes the reasons of what
        # waits (the agent's cycles), so a pending pod's report costs no reasons' write.
        super().__init__(None, namespace=backend.k8s_namespace, watch_timeout=0,
                         spec=spec_of(backend))
        self.backend = backend
        self.logs = _NoLogs()

    def handle_batch(self, pods: list[tuple[dict[str, Any], bool]]) -> int:
        """As the listener, for the pods of this backend's work only: an agent speaks for
        the workflows dispatched to it, never for another backend's."""
        names = {key[0] for key in (task_of_pod(pod) for pod, _ in pods) if key}
        ours = set(self._work().filter(group__workflow__name__in=names)
                   .values_list("group__workflow__name", flat=True))
        return super().handle_batch([(pod, deleted) for pod, deleted in pods
                                     if (task_of_pod(pod) or ("",))[0] in ours])

    def archived(self, payload: dict[str, Any]) -> int:
        """A ``pod_logs`` message: lines of an ending pod's log newer than those stored, and
        its Events, kept while its task is alive (once: a re-list's second copy of an ended
        pod meets a task that ended) and of this backend's work. Returns the lines kept."""
        key = payload.get("task")
        if not (isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            return 0
        task = (Task.objects.filter(workflow__name=key[0], name=key[1],
                                    status__in=ALIVE_TASK_STATUSES)
                .filter(Exists(self._work().filter(group=OuterRef("group_id")))).first())
        retry = payload.get("retry", task.retry_id if task else None)  # an older agent: none
        if task is None or retry != task.retry_id:
            return 0  # ended, or a pod of an earlier run (its group runs again)
        lines, last = pod_logs.lines_after(str(payload.get("text") or "").encode(),
                                           logstore.log_cursor(task.pk, task.retry_id), task.name)
        logstore.log_append(task=task, text="".join(lines), source_ns=last)
        events = [event for event in payload.get("events") or [] if isinstance(event, dict)]
        logstore.events_record(pod_logs.task_events(events[:MAX_POD_EVENTS], task))
        return len(lines)

    def _work(self):
        """This backend's work of creating groups, not moved to another backend since (its
        reports about moved work are stale)."""
        return (AgentWork.objects.filter(backend=self.backend.name, kind=AgentWorkKind.CREATE)
                .exclude(outcome=MOVED)
                .filter(Q(group__backend__isnull=True) | Q(group__backend=self.backend.name)))

    def _eviction(self, pod: dict[str, Any], workflow_name: str, task_name: str,
                  retry: int) -> status.Eviction | None:
        events = pod.get("events")
        if not events:
            return None
        return status.kai_eviction(pod, events)

    def _replace(self, pod: dict[str, Any]) -> None:
        replacement = moves.replacement_of(pod)
        AgentWork.objects.create(backend=self.backend.name, kind=AgentWorkKind.CREATE,
                                 payload={"objects": [replacement]})

    def relisted(self, keys: set[tuple[str, str]], applied_through: int,
                 session: datetime | None) -> int:
        """The tasks whose pods the full list ``keys`` lacks end FAILED_EVICTED."""
        candidates = (Task.objects.filter(status__in=ALIVE_TASK_STATUSES,
                                          group__backend=self.backend.name,
                                          group__dispatches__applied_at__isnull=False,
                                          group__dispatches__cleaned_at__isnull=True)
                      .filter(~applied_before_listing(applied_through, session))
                      .values_list("id", "workflow__name", "name"))
        changed = 0
        for task_id, workflow_name, task_name in candidates:
            if (workflow_name, task_name) not in keys:
                logger.info("agent %s: pod of %s/%s is gone", self.backend.name,
                            workflow_name, task_name)
                changed += lifecycle.task_lost(task_id=task_id, reason="pod_deleted")
        return changed
