"""Pods an agent reports → task statuses, by the in-process listener's own path
(:class:`~scheduler.backends.kubernetes.listener.PodListener.handle_batch`: the pure mapping
of ``status.py`` into ``workflows.lifecycle``), with what the listener would ask its cluster
for answered from the agent's messages instead:

- a moved or released pod's replacement is queued as create work (the listener creates it);
- KAI's eviction of a deleted pod is read from the PodGroup's Events the agent attaches to
  the pod (``events``), as the listener reads them;
- logs are not carried yet: an ended pod's task keeps the lines read while it ran.

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

from scheduler.models import AgentWork, AgentWorkKind, Backend
from workflows import lifecycle
from workflows.models import ALIVE_TASK_STATUSES, Task

from ..kubernetes import moves, status
from ..kubernetes.listener import PodListener
from ..kubernetes.objects import task_of_pod
from .work import applied_before_listing

logger = logging.getLogger(__name__)


class _NoLogs:
    """The agent sends no log lines yet (see the module's docstring)."""

    def archive(self, pod: dict[str, Any]) -> None:
        return None


class AgentPods(PodListener):
    def __init__(self, backend: Backend):
        super().__init__(None, namespace=backend.k8s_namespace, watch_timeout=0)
        self.backend = backend
        self.logs = _NoLogs()

    def handle_batch(self, pods: list[tuple[dict[str, Any], bool]]) -> int:
        """As the listener, for the pods of this backend's work only: an agent speaks for
        the workflows dispatched to it, never for another backend's."""
        names = {key[0] for key in (task_of_pod(pod) for pod, _ in pods) if key}
        ours = set(AgentWork.objects.filter(
            backend=self.backend.name, kind=AgentWorkKind.CREATE,
            group__workflow__name__in=names).values_list("group__workflow__name", flat=True))
        return super().handle_batch([(pod, deleted) for pod, deleted in pods
                                     if (task_of_pod(pod) or ("",))[0] in ours])

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
