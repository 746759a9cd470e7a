"""Status path, the cluster half: LIST then WATCH our pods, resuming from resourceVersion.

Informer semantics without a cache: a full LIST reconciles every pod we own (and finds the
pods that vanished), its ``resourceVersion`` starts the WATCH, and every event is applied
BEFORE the resourceVersion advances past it — an event whose write failed is delivered again
by the next watch, and a redelivered event is a no-op (status reports only move forward). A
watch that ends (server timeout, broken connection) resumes from the last resourceVersion; a
410 Gone (the server compacted past it) or a restart re-LISTs. So no update is lost.

A pod missing from a full LIST although its group was applied before the LIST started was
deleted while nobody watched: its task ends FAILED_EVICTED (``pod_deleted``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from workflows import lifecycle
from workflows.models import ALIVE_TASK_STATUSES, Task

from . import status
from .client import MANAGED_SELECTOR, REQUEST_TIMEOUT, Kube, raw, status_of
from .objects import task_of_pod

logger = logging.getLogger(__name__)


class PodListener:
    def __init__(self, kube: Kube, *, namespace: str | None = None,
                 watch_timeout: int | None = None):
        self.kube = kube
        self.namespace = namespace or settings.OSMO_NAMESPACE
        self.watch_timeout = settings.OSMO_K8S_WATCH_TIMEOUT if watch_timeout is None \
            else watch_timeout
        self.resource_version: str | None = None
        self.relist_requested = False
        self.reasons_changed = False
        self._watch: Any = None

    # --- one pod -----------------------------------------------------------------------------
    def handle(self, pod: dict[str, Any], *, deleted: bool = False) -> bool:
        """Apply one pod's state; True when a task changed."""
        key = task_of_pod(pod)
        observation = status.observe(pod, deleted=deleted) if key else None
        if observation is None:
            return False
        workflow_name, task_name = key
        if observation.status == "SCHEDULING":
            # KAI's reasons ride on the pods; our own scheduler publishes its reasons itself.
            if settings.OSMO_PLACEMENT != "osmo" and status.group_reasons_record(
                    workflow_name=workflow_name, task_name=task_name,
                    reasons=status.reasons_of(observation)):
                self.reasons_changed = True
            if not observation.node:
                return False
        return lifecycle.task_observed(
            workflow_name=workflow_name, task_name=task_name, status=observation.status,
            node=observation.node, exit_code=observation.exit_code, reason=observation.reason)

    # --- LIST --------------------------------------------------------------------------------
    def relist(self) -> int:
        """Reconcile every pod we own; returns how many tasks changed."""
        started = timezone.now()
        body = raw(self.kube.core.list_namespaced_pod(
            self.namespace, label_selector=MANAGED_SELECTOR, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))
        changed, seen = 0, set()
        for pod in body.get("items") or []:
            key = task_of_pod(pod)
            if key is not None:
                seen.add(key)
            changed += self.handle(pod)
        changed += self._vanished(seen, started)
        self.resource_version = (body.get("metadata") or {}).get("resourceVersion")
        self.relist_requested = False
        return changed

    def _vanished(self, seen: set[tuple[str, str]], listed_at: datetime) -> int:
        candidates = (Task.objects.filter(
            status__in=ALIVE_TASK_STATUSES, group__dispatches__namespace=self.namespace,
            group__dispatches__applied_at__lte=listed_at,
            group__dispatches__cleaned_at__isnull=True)
            .values_list("id", "workflow__name", "name"))
        changed = 0
        for task_id, workflow_name, task_name in candidates:
            if (workflow_name, task_name) not in seen:
                logger.info("k8s backend: pod of %s/%s is gone", workflow_name, task_name)
                changed += lifecycle.task_lost(task_id=task_id, reason="pod_deleted")
        return changed

    # --- WATCH -------------------------------------------------------------------------------
    def watch_once(self, *, timeout: int | None = None) -> int:
        """Apply events from ``resource_version`` until the server ends the watch.
        Raises ApiException(410) when the version is too old (then re-LIST)."""
        from kubernetes import watch

        timeout = self.watch_timeout if timeout is None else timeout
        # Events stay raw dicts (return type "object"): nothing is lost to, or fails in, the
        # client's model conversion, and LIST and WATCH hand the same shape to handle().
        self._watch = watch.Watch(return_type="object")
        changed = 0
        try:
            for event in self._watch.stream(
                    self.kube.core.list_namespaced_pod, self.namespace,
                    label_selector=MANAGED_SELECTOR, resource_version=self.resource_version,
                    allow_watch_bookmarks=True, timeout_seconds=timeout,
                    _request_timeout=(REQUEST_TIMEOUT[0], timeout + 15)):
                obj = event["raw_object"]
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if event["type"] != "BOOKMARK":
                    changed += self.handle(obj, deleted=event["type"] == "DELETED")
                if version:
                    self.resource_version = version
        finally:
            self._watch = None
        return changed

    def step(self) -> int:
        """One LIST (first time, after 410 or when asked) or one WATCH."""
        if self.resource_version is None or self.relist_requested:
            return self.relist()
        try:
            return self.watch_once()
        except Exception as exc:
            if status_of(exc) == 410:
                logger.info("k8s backend: watch expired (410 Gone), re-listing")
                self.resource_version = None
                return 0
            raise

    def stop(self) -> None:
        """End a watch that is blocked reading: ``Watch.stop`` only takes effect at the next
        event, so the response's socket is shut down too (urllib3's ``shutdown``)."""
        current = self._watch
        if current is not None:
            current.stop()
            response = getattr(current, "_resp", None)
            if response is not None and hasattr(response, "shutdown"):
                try:
                    response.shutdown()
                except Exception:  # noqa: BLE001 - already closed
                    pass
