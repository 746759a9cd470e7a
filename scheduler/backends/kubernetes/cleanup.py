"""Cleanup: an ended group's pods, PodGroup, Service and Secrets leave the cluster, by label.

Derived from the database, so nothing is missed: every dispatched group (a
:class:`~scheduler.models.GroupDispatch` row, written before the first create) that is final —
completed, failed, canceled, or whose workflow ended — is deleted by its label selector and
marked ``cleaned_at``. A wake-up (``scheduler.backends.cluster_changed``) only makes it sooner.
Pods go first, then the PodGroup, Service and Secrets; a 404 counts as done. An object that
is already being deleted (``metadata.deletionTimestamp`` set: a pod waiting for its kubelet,
forever when its node is lost) is left alone — deleting it again changes nothing.

A group an exit action runs again (its ``retry_id`` above its row's) has its earlier run's
objects deleted the same way, by the run's label; the row then records the new run, which
the dispatcher creates once nothing of the earlier run is left, terminating pods included.

Sweeps (decisions where the documents are silent): on a subpool's archive, and at every full
resync, objects carrying our managed-by label whose group is not alive in this database are
deleted too — leftovers of a lost dispatch record or of a restored database. The namespace
(``OSMO_NAMESPACE``) belongs to one OSMO installation. Queues are not touched: the queue sync
owns them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from scheduler.core.kai_names import GROUP_NAME_ANNOTATION, WORKFLOW_NAME_ANNOTATION, label_value
from scheduler.models import GroupDispatch
from workflows.models import (
    ALIVE_TASK_STATUSES,
    ALIVE_WORKFLOW_STATUSES,
    FINAL_TASK_STATUSES,
    WorkflowGroup,
)

from .client import MANAGED_SELECTOR, PODGROUPS, REQUEST_TIMEOUT, Kube, api_errors, raw, status_of
from .objects import earlier_runs_selector, group_selector

logger = logging.getLogger(__name__)

KINDS = ("pods", "podgroups", "services", "secrets")  # deletion order


class Cleaner:
    def __init__(self, kube: Kube, *, namespace: str | None = None, batch: int = 100):
        self.kube = kube
        self.namespace = namespace or settings.OSMO_NAMESPACE
        self.batch = batch

    # --- API ---------------------------------------------------------------------------------
    def _list(self, kind: str, selector: str, *,
              terminating: bool = False) -> list[dict[str, Any]]:
        """Our objects of ``kind`` matching ``selector`` that are not already being deleted
        (``terminating``: those too)."""
        core, ns = self.kube.core, self.namespace
        kw = {"label_selector": selector, "_preload_content": False,
              "_request_timeout": REQUEST_TIMEOUT}
        if kind == "pods":
            body = raw(core.list_namespaced_pod(ns, **kw))
        elif kind == "services":
            body = raw(core.list_namespaced_service(ns, **kw))
        elif kind == "secrets":
            body = raw(core.list_namespaced_secret(ns, **kw))
        else:
            body = raw(self.kube.custom.list_namespaced_custom_object(*PODGROUPS[:2], ns,
                                                                      PODGROUPS[2], **kw))
        return [obj for obj in body.get("items") or []
                if terminating or not (obj.get("metadata") or {}).get("deletionTimestamp")]

    def _delete(self, kind: str, name: str) -> bool:
        core, ns = self.kube.core, self.namespace
        kw = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
        try:
            if kind == "pods":
                raw(core.delete_namespaced_pod(name, ns, **kw))
            elif kind == "services":
                raw(core.delete_namespaced_service(name, ns, **kw))
            elif kind == "secrets":
                raw(core.delete_namespaced_secret(name, ns, **kw))
            else:
                raw(self.kube.custom.delete_namespaced_custom_object(
                    *PODGROUPS[:2], ns, PODGROUPS[2], name, **kw))
            return True
        except api_errors() as exc:
            if status_of(exc) == 404:
                return False
            raise

    def delete_selected(self, selector: str) -> int:
        """Delete every object of ours matching ``selector``; returns how many."""
        deleted = 0
        for kind in KINDS:
            for obj in self._list(kind, selector):
                deleted += self._delete(kind, obj["metadata"]["name"])
        return deleted

    # --- ended groups --------------------------------------------------------------------
    def run_once(self) -> int:
        """Clean up to ``batch`` ended groups; returns how many groups were cleaned."""
        rows = list(GroupDispatch.objects.filter(cleaned_at__isnull=True,
                                                 namespace=self.namespace)
                    .filter(Q(group__status__in=FINAL_TASK_STATUSES)
                            | ~Q(group__workflow__status__in=ALIVE_WORKFLOW_STATUSES))
                    .select_related("group__workflow").order_by("pk")[:self.batch])
        for row in rows:
            deleted = self.delete_selected(group_selector(row.group.workflow.name,
                                                          row.group.name))
            GroupDispatch.objects.filter(pk=row.pk).update(cleaned_at=timezone.now())
            if deleted:
                logger.info("k8s backend: removed %d object(s) of %s", deleted,
                            row.group.podgroup)
        return len(rows) + self.clear_earlier_runs()

    # --- groups run again ----------------------------------------------------------------
    def clear_earlier_runs(self) -> int:
        """Groups an exit action runs again: their earlier run's objects are deleted, and once
        none is left — a pod still terminating included, so a rerun never overlaps its
        predecessor — the row records the new run, which the dispatcher then creates. Returns
        how many groups are ready to run again."""
        rows = list(GroupDispatch.objects.filter(
            cleaned_at__isnull=True, namespace=self.namespace,
            retry_id__lt=F("group__retry_id"), group__status__in=ALIVE_TASK_STATUSES,
            group__workflow__status__in=ALIVE_WORKFLOW_STATUSES)
            .select_related("group__workflow").order_by("pk")[:self.batch])
        ready = 0
        for row in rows:
            group = row.group
            selector = earlier_runs_selector(group.workflow.name, group.name, group.retry_id)
            deleted = self.delete_selected(selector)
            left = sum(len(self._list(kind, selector, terminating=True)) for kind in KINDS)
            if deleted:
                logger.info("k8s backend: removed %d object(s) of %s before its retry %d",
                            deleted, group.podgroup, group.retry_id)
            if left:
                continue  # still terminating: the next pass looks again
            ready += GroupDispatch.objects.filter(pk=row.pk, retry_id=row.retry_id).update(
                retry_id=group.retry_id, applied_at=None, attempts=0, next_attempt_at=None,
                last_error="", reasons=[])
        return ready

    # --- sweeps ------------------------------------------------------------------------------
    def _alive_groups(self, keys: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        keys = set(keys)
        names = {workflow for workflow, _ in keys}
        rows = WorkflowGroup.objects.filter(
            workflow__name__in=names, status__in=ALIVE_TASK_STATUSES,
            workflow__status__in=ALIVE_WORKFLOW_STATUSES).values_list("workflow__name", "name")
        return {row for row in rows if row in keys}

    def sweep(self, selector: str = MANAGED_SELECTOR) -> int:
        """Delete objects of ours (matching ``selector``) whose group is not alive here."""
        found: list[tuple[str, str, tuple[str, str] | None]] = []
        for kind in KINDS:
            for obj in self._list(kind, selector):
                annotations = obj["metadata"].get("annotations") or {}
                key = (annotations.get(WORKFLOW_NAME_ANNOTATION),
                       annotations.get(GROUP_NAME_ANNOTATION))
                found.append((kind, obj["metadata"]["name"], key if all(key) else None))
        alive = self._alive_groups(key for _, _, key in found if key)
        deleted = 0
        for kind, name, key in found:
            if key is None or key not in alive:
                deleted += self._delete(kind, name)
        if deleted:
            logger.info("k8s backend: swept %d leftover object(s) (%s)", deleted, selector)
        return deleted

    def sweep_pool(self, pool_name: str) -> int:
        return self.sweep(f"{MANAGED_SELECTOR},osmo.pool={label_value(pool_name)}")
