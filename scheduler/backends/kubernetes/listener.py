"""Status path, the cluster half: LIST then WATCH our pods, resuming from resourceVersion.

Informer semantics without a cache: a full LIST reconciles every pod we own (and finds the
pods that vanished), its ``resourceVersion`` starts the WATCH, and every event is applied
BEFORE the resourceVersion advances past it — an event whose write failed is delivered again
by the next watch, and a redelivered event is a no-op (status reports only move forward). A
watch that ends (server timeout, broken connection) resumes from the last resourceVersion; a
410 Gone (the server compacted past it) or a restart re-LISTs. So no update is lost.

Pod events are applied in batches: a LIST in transactions of ``BATCH`` pods, a WATCH's events
as they arrive together (within ``listwatch.BATCH_WINDOW`` of each other), so the statuses of a
burst of bindings and starts reach the database in a few transactions instead of one per pod.

A pod missing from a full LIST although its group was applied before the LIST started was
deleted while nobody watched: its task ends FAILED_EVICTED (``pod_deleted``). A pod of an
earlier run of its group (``osmo.retry`` below the task's ``retry_id``: an exit action ran the
group again) says nothing of its task, whatever becomes of it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from django.db.models import F
from django.utils import timezone

from scheduler.backends.spec import BackendSpec, default_spec
from scheduler.core.kai_names import PODGROUP_ANNOTATION, retry_of
from workflows import lifecycle, selectors
from workflows.models import ALIVE_TASK_STATUSES, FINAL_TASK_STATUSES, Task

from . import moves, reasons, status
from .client import MANAGED_SELECTOR, REQUEST_TIMEOUT, Kube, raw, status_of
from .listwatch import ListWatch
from .objects import task_of_pod
from .pod_logs import PodLogs

logger = logging.getLogger(__name__)

BATCH = 500  # pods of a re-list applied in one transaction
# A deleted pod's PodGroup Events are read this many times, this many seconds apart, for KAI's
# Evict Event (written after the delete, at times): 3 s at most, for a pod deleted unexplained.
EVICT_EVENT_READS, EVICT_EVENT_WAIT = 7, 0.5


class PodListener(ListWatch):
    def __init__(self, kube: Kube, *, namespace: str | None = None,
                 watch_timeout: int | None = None, spec: BackendSpec | None = None):
        super().__init__()
        self.kube = kube
        self.spec = spec or default_spec()
        self.namespace = namespace or self.spec.namespace
        self.watch_timeout = self.spec.watch_timeout if watch_timeout is None else watch_timeout
        self.reasons_changed = False
        self.logs = PodLogs(kube, namespace=self.namespace)

    # --- pods --------------------------------------------------------------------------------
    def handle(self, pod: dict[str, Any], *, deleted: bool = False) -> bool:
        """Apply one pod's state; True when a task changed."""
        return self.handle_batch([(pod, deleted)]) > 0

    def handle_batch(self, pods: list[tuple[dict[str, Any], bool]]) -> int:
        """Apply pods' states, (pod, deleted) in their order; returns how many tasks changed.
        Their task statuses go to the database in one transaction
        (:func:`workflows.lifecycle.tasks_observed`)."""
        changed = 0
        observed: list[lifecycle.TaskObservation] = []
        for pod, deleted in pods:
            key = task_of_pod(pod)
            retry = retry_of(pod.get("metadata") or {})
            if key and (moves.moved_by_kai(pod) or moves.is_released(pod)):
                changed += lifecycle.tasks_observed(observed)  # in order, before it leaves
                observed = []
                changed += self._left(pod, *key, retry, deleted=deleted)
                continue
            eviction = self._eviction(pod, *key, retry) if key and deleted else None
            observation = status.observe(pod, deleted=deleted, eviction=eviction) \
                if key else None
            if observation is None:
                continue
            workflow_name, task_name = key
            if eviction is not None:
                changed += lifecycle.tasks_observed(observed)  # in order, before the end
                observed = []
                changed += self._preempted(pod, workflow_name, task_name, retry, observation)
                continue
            if observation.node and moves.is_replacement(pod) and \
                    observation.status in ALIVE_TASK_STATUSES:
                changed += lifecycle.tasks_observed(observed)  # in order, before the move
                observed = []
                changed += lifecycle.task_moved(workflow_name=workflow_name,
                                                task_name=task_name, node=observation.node)
            if observation.status == "SCHEDULING":
                # KAI's reasons ride on the pods; our own scheduler publishes its own.
                why = status.reasons_of(observation)
                if not self.spec.places_pods and reasons.group_reasons_record(
                        workflow_name=workflow_name, task_name=task_name, reasons=why):
                    self.reasons_changed = True
                    reasons.unschedulable_event(workflow_name=workflow_name,
                                                task_name=task_name, reasons=why)
                if not observation.node:
                    continue
            if observation.status in FINAL_TASK_STATUSES:
                self.logs.archive(pod)  # before the final status: then the cleaner may delete it
            observed.append(lifecycle.TaskObservation(
                workflow_name, task_name, observation.status, observation.node,
                observation.exit_code, observation.reason, retry))
        return changed + lifecycle.tasks_observed(observed)

    def _eviction(self, pod: dict[str, Any], workflow_name: str, task_name: str,
                  retry: int) -> status.Eviction | None:
        """KAI's eviction of a deleted pod's PodGroup, read from its Events — only for a pod
        that ended without saying why (no final phase, no preemption condition) under KAI,
        while its task is alive (a canceled group's pods cost no read)."""
        if self.spec.places_pods:
            return None
        probe = status.observe(pod, deleted=True)
        if probe is None or probe.reason != "pod_deleted" or not selectors.task_alive(
                workflow_name=workflow_name, task_name=task_name, retry_id=retry):
            return None
        group = ((pod.get("metadata") or {}).get("annotations") or {}).get(PODGROUP_ANNOTATION)
        if not group:
            return None
        # KAI's event recorder writes asynchronously: its Evict Event may arrive a moment
        # after the pod is gone, so an answer without one is read again, for a bounded time.
        for attempt in range(EVICT_EVENT_READS):
            try:
                body = raw(self.kube.core.list_namespaced_event(
                    self.namespace, field_selector=f"involvedObject.kind=PodGroup,"
                                                   f"involvedObject.name={group}",
                    _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
            except Exception as exc:  # noqa: BLE001 - then it ends as a deleted pod
                logger.warning("k8s backend: reading the Events of %s failed: %s", group, exc)
                return None
            eviction = status.kai_eviction(pod, body.get("items") or [])
            if eviction is not None or attempt == EVICT_EVENT_READS - 1:
                return eviction
            time.sleep(EVICT_EVENT_WAIT)
        return None

    def _preempted(self, pod: dict[str, Any], workflow_name: str, task_name: str,
                   retry: int, observation: status.Observation) -> int:
        """The task ends FAILED_PREEMPTED; its events say who preempted it, as KAI says."""
        self.logs.archive(pod)
        changed = lifecycle.tasks_observed([lifecycle.TaskObservation(
            workflow_name, task_name, observation.status, observation.node, None,
            observation.reason, retry)])
        if changed:
            reasons.preempted_event(workflow_name=workflow_name, task_name=task_name,
                                    eviction=observation.eviction)
        return changed

    def _left(self, pod: dict[str, Any], workflow_name: str, task_name: str, retry: int, *,
              deleted: bool) -> bool:
        """The pod leaves and its task goes on in a replacement (not a task that ended
        meanwhile): KAI's consolidation moved it, or our scheduler released it before it ran
        — then the task holds no node until its replacement is bound."""
        if not selectors.task_alive(workflow_name=workflow_name, task_name=task_name,
                                    retry_id=retry):
            return False
        self._replace(pod)
        if deleted or not moves.is_released(pod):
            return False
        return lifecycle.task_released(workflow_name=workflow_name, task_name=task_name,
                                       node=(pod.get("spec") or {}).get("nodeName") or "")

    def _replace(self, pod: dict[str, Any]) -> None:
        """The pod's replacement, unbound, for the scheduler to place: KAI leaves re-creating a
        moved pod to its owner; our scheduler makes a released pod's itself, and this is the
        fallback when that create failed. Made once (409: it exists); a failed create is made
        again at the pod's next event or the next re-list."""
        replacement = moves.replacement_of(pod)
        try:
            self.kube.core.create_namespaced_pod(
                replacement["metadata"]["namespace"], replacement, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT).release_conn()
        except Exception as exc:  # noqa: BLE001
            if status_of(exc) != 409:
                logger.warning("k8s backend: recreating %s failed: %s", pod["metadata"]["name"],
                               exc)

    # --- LIST --------------------------------------------------------------------------------
    def relist(self) -> int:
        """Reconcile every pod we own; returns how many tasks changed."""
        started = timezone.now()
        body = raw(self.kube.core.list_namespaced_pod(
            self.namespace, label_selector=MANAGED_SELECTOR, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))
        items = body.get("items") or []
        seen = {key for key in map(task_of_pod, items) if key is not None}
        changed = sum(self.handle_batch([(pod, False) for pod in items[start:start + BATCH]])
                      for start in range(0, len(items), BATCH))
        changed += self._vanished(seen, started)
        self.resource_version = (body.get("metadata") or {}).get("resourceVersion")
        self.relist_requested = False
        return changed

    def _vanished(self, seen: set[tuple[str, str]], listed_at: datetime) -> int:
        candidates = (Task.objects.filter(
            status__in=ALIVE_TASK_STATUSES, group__dispatches__namespace=self.namespace,
            group__dispatches__applied_at__lte=listed_at,
            group__dispatches__cleaned_at__isnull=True,
            group__dispatches__retry_id=F("retry_id"))  # the task's run was dispatched
            .values_list("id", "workflow__name", "name"))
        changed = 0
        for task_id, workflow_name, task_name in candidates:
            if (workflow_name, task_name) not in seen:
                logger.info("k8s backend: pod of %s/%s is gone", workflow_name, task_name)
                changed += lifecycle.task_lost(task_id=task_id, reason="pod_deleted")
        return changed

    # --- WATCH -------------------------------------------------------------------------------
    def on_event(self, event_type: str, obj: dict[str, Any]) -> int:
        return self.handle(obj, deleted=event_type == "DELETED")

    def watch_once(self, *, timeout: int | None = None) -> int:
        """Apply events from ``resource_version`` until the server ends the watch, in
        batches (what arrives within ``BATCH_WINDOW`` of a batch's first event: one
        transaction, not one per pod event). Raises ApiException(410) when the version is too
        old (then re-LIST)."""
        return self.stream_batches(
            self.kube.core.list_namespaced_pod, self.namespace, label_selector=MANAGED_SELECTOR,
            timeout=self.watch_timeout if timeout is None else timeout,
            apply=lambda events: self.handle_batch([(obj, kind == "DELETED")
                                                    for kind, obj in events]))
