"""Submission path: runnable groups → their objects on the cluster, idempotently.

A group is runnable once it is SCHEDULING (at admission without inputs, or when ``settle``
releases it); the database is the queue, so a pass simply selects the runnable groups whose
objects are not all applied yet (bounded batch, oldest workflow first), batch after batch, the
next one claimed and prepared while the previous one's objects are created. Per group:

1. record the intent (a :class:`~scheduler.models.GroupDispatch` row, unique per group) and
   commit it, so cleanup can find the group whatever happens next;
2. make sure the pool's leaf Queue exists (a PodGroup must never point at a missing queue):
   known queues are cached per process; a missing one triggers a full queue sync now
   (:func:`scheduler.kai.sync.sync_namespace`) and is read again;
3. create Secrets, Service, PodGroup, Pods in that order. A 409 AlreadyExists (an earlier
   attempt whose answer was lost, or a crash before step 4) reads the object: ours (our
   managed-by label and workflow annotation) is adopted — a PodGroup whose spec or labels
   differ is replaced with the resourceVersion read (a 409 Conflict re-reads, bounded), pods,
   Services and Secrets are taken as they are (a pod's spec is immutable and one of ours with
   this name is this task's pod) — anything else is a name conflict;
4. mark the row applied.

A group an exit action runs again (RESCHEDULE: SCHEDULING with the next ``retry_id``) keeps its
row; it is runnable again once the cleaner has removed the earlier run's objects and pointed
the row at the new run (``cleanup.py``). Its new objects carry the new run in their label and
its pods in their names (``objects.py``).

Errors (decisions where the documents are silent): transient ones (no answer, 429, 5xx) end
the pass with :class:`ClusterUnavailable` — the runner backs off and the next pass repeats
the group, creating nothing twice; 400/422 and name conflicts can never succeed, so the
group's alive tasks end FAILED (reason ``submission_failed``) and the workflow fails as a gang
does; other answers (401/403, a missing namespace or queue) are an operator's to fix: the
group is retried with exponential backoff (``next_attempt_at``) and the error is kept.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from scheduler.backends.destined import destined_q
from scheduler.backends.fleet import fleet_pass
from scheduler.backends.spec import BackendSpec, default_spec
from scheduler.batch_reads import one_batch
from scheduler.core.kai_names import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    WORKFLOW_NAME_ANNOTATION,
)
from scheduler.kai.sync import KaiSyncError, needs_update, sync_namespace
from scheduler.kai.workflow_manifests import stored_spec
from scheduler.models import Backend, GroupDispatch
from workflows import lifecycle
from workflows.models import ALIVE_WORKFLOW_STATUSES, TaskStatus, WorkflowGroup
from workflows.spec import WorkflowSpec

from . import metrics
from .client import (
    PODGROUPS,
    POOL_SIZE,
    QUEUES,
    REQUEST_TIMEOUT,
    Kube,
    api_errors,
    call,
    describe,
    is_transient,
    raw,
    status_of,
)
from .credential_secrets import owner_references
from .objects import GroupObjects, group_objects, workflow_manifests

logger = logging.getLogger(__name__)

MAX_CONFLICT_RETRIES = 5
PERMANENT_STATUSES = (400, 422)


class ClusterUnavailable(Exception):
    """The API server did not answer usefully; try the whole pass again later."""


class DispatchRefused(Exception):
    """A definite answer that stops this group for now; ``permanent``: it never will."""

    def __init__(self, message: str, *, permanent: bool):
        super().__init__(message)
        self.permanent = permanent


@dataclass
class DispatchSummary:
    applied: list[str] = field(default_factory=list)  # podgroup names
    deferred: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


LOGGED_NAMES = 10  # a backlog's pass applies thousands: its log line names a few


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:LOGGED_NAMES])
    return shown if len(names) <= LOGGED_NAMES else f"{shown} and {len(names) - LOGGED_NAMES} more"


@dataclass
class _Batch:
    """Claimed groups, those prepared, and their creates running on the dispatch threads."""

    groups: list[WorkflowGroup]
    prepared: list[tuple[GroupDispatch, WorkflowGroup, GroupObjects | None]]
    futures: list[Future]


class _Objects:
    """Create / read / replace by kind, raw JSON in and out."""

    def __init__(self, kube: Kube, namespace: str):
        self.kube = kube
        self.namespace = namespace

    def create(self, obj: dict[str, Any]) -> dict:
        ns, kind = self.namespace, obj["kind"]
        if kind in ("Pod", "Service", "Secret"):
            path = f"/api/v1/namespaces/{ns}/{kind.lower()}s"
        else:
            path = f"/apis/{PODGROUPS[0]}/{PODGROUPS[1]}/namespaces/{ns}/{PODGROUPS[2]}"
        return call(self.kube, "POST", path, obj)

    def read(self, kind: str, name: str) -> dict:
        core, ns = self.kube.core, self.namespace
        kw = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
        if kind == "Pod":
            return raw(core.read_namespaced_pod(name, ns, **kw))
        if kind == "Service":
            return raw(core.read_namespaced_service(name, ns, **kw))
        if kind == "Secret":
            return raw(core.read_namespaced_secret(name, ns, **kw))
        return raw(self.kube.custom.get_namespaced_custom_object(*PODGROUPS[:2], ns,
                                                                 PODGROUPS[2], name, **kw))

    def replace_podgroup(self, name: str, body: dict) -> dict:
        return raw(self.kube.custom.replace_namespaced_custom_object(
            *PODGROUPS[:2], self.namespace, PODGROUPS[2], name, body, _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))


def _ours(existing: dict, desired: dict) -> bool:
    metadata = existing.get("metadata") or {}
    return (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY and \
        (metadata.get("annotations") or {}).get(WORKFLOW_NAME_ANNOTATION) == \
        desired["metadata"]["annotations"][WORKFLOW_NAME_ANNOTATION]


class Dispatcher:
    """``workers``: threads creating a batch's objects. Each mostly waits for the API server,
    so they are as many as the client's keep-alive connections (``POOL_SIZE``), not cores:
    a batch of 50 groups is then about two groups' round trips, not seven. ``batch`` groups
    are claimed at a time, up to ``max_batch`` during a backlog (fewer claims, each a few
    statements, for the same groups)."""

    def __init__(self, kube: Kube, *, namespace: str | None = None, batch: int = 50,
                 max_batch: int = 400, base_delay: float = 2.0, max_delay: float = 300.0,
                 workers: int = POOL_SIZE, spec: BackendSpec | None = None):
        self.kube = kube
        self.spec = spec or default_spec()
        self.namespace = namespace or self.spec.namespace
        self.backend = self.spec.name  # only groups of pools it serves; recorded on the group
        self.batch = batch
        self.max_batch = max(batch, max_batch)
        self.workers = workers
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.objects = _Objects(kube, self.namespace)
        self.known_queues: set[str] = set()

    # --- selection ---------------------------------------------------------------------------
    def runnable(self, now: datetime, *, limit: int | None = None, exclude=()):
        """Up to ``limit`` (else ``batch``) runnable groups, oldest workflow first, without
        those of ``exclude`` (a batch whose creates are still running); only groups of pools
        that name this backend and that are its to run (`destined_q`: chosen for it by the
        fleet, or of a pool it alone serves), and none while it is under maintenance."""
        applied = GroupDispatch.objects.filter(group=OuterRef("pk"), applied_at__isnull=False)
        waiting = GroupDispatch.objects.filter(group=OuterRef("pk"), next_attempt_at__gt=now)
        # A group run again waits until the cleaner has removed its earlier run's objects.
        earlier = GroupDispatch.objects.filter(group=OuterRef("pk"),
                                               retry_id__lt=OuterRef("retry_id"))
        return (WorkflowGroup.objects
                .filter(status=TaskStatus.SCHEDULING,
                        workflow__status__in=ALIVE_WORKFLOW_STATUSES)
                .filter(destined_q(self.backend))
                .filter(~Exists(Backend.objects.filter(name=self.backend, maintenance=True)))
                .filter(~Exists(applied), ~Exists(waiting), ~Exists(earlier))
                .exclude(pk__in=list(exclude))
                .select_related("workflow__pool")
                .order_by("workflow__submitted_at", "workflow_id", "position")
                [:limit or self.batch])

    # --- passes ------------------------------------------------------------------------------
    def run_once(self, *, now: datetime | None = None) -> DispatchSummary:
        """Dispatch up to ``batch`` runnable groups (see :meth:`run`)."""
        return self.run(batches=1, now=now)

    def run(self, *, batches: int = 1, now: datetime | None = None) -> DispatchSummary:
        """Dispatch batch after batch while groups are runnable (at most ``batches``),
        pipelined: batch n+1 is claimed and prepared (database reads, manifests, queue checks)
        while batch n's objects are created on ``workers`` threads, each group's creates
        queued as soon as it is prepared, so the threads always have work. A claim is
        ``batch`` groups, doubled up to ``max_batch`` while each comes back full (a backlog).
        Raises ClusterUnavailable once every batch started has been created and recorded (the
        failed groups are claimed again next pass)."""
        # The waiting gangs of pools naming several backends: whose each is.
        fleet_pass(moves=False)
        summary = DispatchSummary()
        started: deque[_Batch] = deque()
        size, unavailable = self.batch, None
        began, preparing, number = time.monotonic(), 0.0, 0
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            try:
                for _ in range(batches):
                    claiming = time.monotonic()
                    claimed = [group.pk for batch in started for group in batch.groups]
                    groups = list(self.runnable(now or timezone.now(), limit=size,
                                                exclude=claimed))
                    if not groups:
                        break
                    number += 1
                    batch, error = self._prepare(groups, summary, pool)
                    preparing += time.monotonic() - claiming
                    started.append(batch)
                    if error is not None:
                        unavailable = error
                        break
                    size = min(self.max_batch, size * 2) if len(groups) == size else self.batch
                    if len(started) > 1:
                        unavailable = self._record(started.popleft(), summary)
                        if unavailable is not None:
                            break
            finally:  # every batch started is recorded, whatever ended the loop
                while started:
                    unavailable = self._record(started.popleft(), summary) or unavailable
        if summary.applied:  # the figures say whether claiming and preparing keep up
            logger.info("k8s backend: applied %d groups in %d batches, %.2f s (claiming and "
                        "preparing %.2f s): %s", len(summary.applied), number,
                        time.monotonic() - began, preparing, _some(summary.applied))
        if unavailable is not None:
            raise ClusterUnavailable(describe(unavailable)) from unavailable
        return summary

    def _prepare(self, groups: list[WorkflowGroup], summary: DispatchSummary,
                 pool: ThreadPoolExecutor) -> tuple[_Batch, BaseException | None]:
        """The claimed groups' intents (committed in one statement before any create call)
        and objects, each group's creates handed to ``pool`` as soon as it is prepared; the
        error is an API server's answer that ended the preparation."""
        built: dict[int, tuple[WorkflowSpec, list[dict]]] = {}  # workflow → spec, manifests
        batch = _Batch(groups, [], [])
        GroupDispatch.objects.bulk_create(
            [GroupDispatch(group=group, namespace=self.namespace, retry_id=group.retry_id)
             for group in groups],
            ignore_conflicts=True)
        rows = {row.group_id: row for row in GroupDispatch.objects.filter(
            group_id__in=[group.pk for group in groups])}
        statuses = dict(WorkflowGroup.objects.filter(pk__in=[group.pk for group in groups])
                        .values_list("pk", "status"))
        with one_batch():  # one Topology read, one per submitter's registries
            for group in groups:
                workflow = group.workflow
                row = rows[group.pk]
                try:
                    if workflow.manifests is None and workflow.pk not in built:
                        spec = stored_spec(workflow)
                        built[workflow.pk] = (spec, workflow_manifests(workflow, spec))
                    spec, manifests = built.get(workflow.pk, (None, None))
                    objects = self.prepare(group, manifests, spec=spec,
                                           status=statuses.get(group.pk))
                    batch.prepared.append((row, group, objects))
                    batch.futures.append(pool.submit(self._apply_objects, objects))
                except DispatchRefused as refused:
                    self._refused(row, group, refused)
                    (summary.failed if refused.permanent else summary.deferred).append(
                        group.podgroup)
                except api_errors() as exc:
                    GroupDispatch.objects.filter(pk=row.pk).update(last_error=describe(exc))
                    return batch, exc
        return batch, None

    def _apply_objects(self, objects: GroupObjects | None) -> BaseException | None:
        if objects is None:
            return None
        try:
            self._apply_all(objects)
        except (DispatchRefused, *api_errors()) as exc:
            return exc
        return None

    def _apply_all(self, objects: GroupObjects) -> None:
        pods = {}
        for obj in objects.in_create_order():
            applied = self.apply(obj)
            if obj["kind"] == "Pod":
                pods[obj["metadata"]["name"]] = applied
        for secret, owners in objects.secret_owners.items():
            # The pods own their credentials' Secrets: deleted with the last of them.
            references = owner_references([pods[name] for name in owners if name in pods])
            if references:
                call(self.kube, "PATCH",
                     f"/api/v1/namespaces/{self.namespace}/secrets/{secret}",
                     {"metadata": {"ownerReferences": references}},
                     content_type="application/merge-patch+json")

    def _record(self, batch: _Batch, summary: DispatchSummary) -> BaseException | None:
        """Wait for a batch's creates and record each group's outcome; returns the first
        answer that says the API server is unavailable."""
        unavailable = None
        applied: list[int] = []
        for (row, group, _objects), future in zip(batch.prepared, batch.futures, strict=True):
            outcome = future.result()
            if isinstance(outcome, DispatchRefused):
                self._refused(row, group, outcome)
                (summary.failed if outcome.permanent else summary.deferred).append(
                    group.podgroup)
            elif outcome is not None:
                GroupDispatch.objects.filter(pk=row.pk).update(last_error=describe(outcome))
                unavailable = unavailable or outcome
            else:
                applied.append(row.pk)
                summary.applied.append(group.podgroup)
        if applied:
            now = timezone.now()
            GroupDispatch.objects.filter(pk__in=applied).update(
                applied_at=now, last_error="", next_attempt_at=None)
            lifecycle.groups_dispatched([group.pk for row, group, objects in batch.prepared
                                         if row.pk in applied and objects is not None],
                                        self.backend)
            # Lag of the groups runnable from their submission (not those that waited for
            # inputs).
            metrics.record_dispatched([
                (now - group.workflow.submitted_at).total_seconds()
                for row, group, _objects in batch.prepared
                if row.pk in applied and not group.depends_on])
        return unavailable

    def _refused(self, row: GroupDispatch, group: WorkflowGroup,
                 refused: DispatchRefused) -> None:
        attempts = row.attempts + 1
        delay = min(self.max_delay, self.base_delay * 2 ** min(attempts - 1, 16))
        delay *= random.uniform(0.5, 1.0)  # jitter: retries of many groups do not align
        GroupDispatch.objects.filter(pk=row.pk).update(
            attempts=attempts, last_error=str(refused)[:2000],
            next_attempt_at=None if refused.permanent else
            timezone.now() + timedelta(seconds=delay))
        logger.warning("k8s backend: group %s %s: %s", group.podgroup,
                       "failed" if refused.permanent else "deferred", refused)
        if refused.permanent:
            lifecycle.group_fail_submission(group_id=group.pk)

    def prepare(self, group: WorkflowGroup, manifests: list[dict] | None = None, *,
                spec: WorkflowSpec | None = None, status: str | None = None
                ) -> GroupObjects | None:
        """The objects of ``group`` with its queue ensured; None when it is no longer to be
        dispatched (``status``: its status just read, else read here; ``spec`` and
        ``manifests``: its workflow's, when parsed already). Raises DispatchRefused / API
        errors."""
        if status is None:
            status = WorkflowGroup.objects.filter(pk=group.pk).values_list(
                "status", flat=True).first()
        if status != TaskStatus.SCHEDULING:
            return None  # canceled or failed meanwhile: cleanup takes it from here
        objects = group_objects(group.workflow, group, manifests=manifests, spec=spec)
        self.ensure_queue(objects.podgroup["spec"]["queue"])
        return objects

    def dispatch(self, group: WorkflowGroup, manifests: list[dict] | None = None) -> None:
        """Apply every object of ``group`` (idempotent). Raises DispatchRefused / API errors."""
        objects = self.prepare(group, manifests)
        if objects is not None:
            self._apply_all(objects)
            lifecycle.groups_dispatched([group.pk], self.backend)

    # --- queue ordering --------------------------------------------------------------------
    def _queue_exists(self, name: str) -> bool:
        try:
            raw(self.kube.custom.get_cluster_custom_object(
                *QUEUES, name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
            return True
        except api_errors() as exc:
            if status_of(exc) == 404:
                return False
            raise

    def ensure_queue(self, name: str) -> None:
        if name in self.known_queues:
            return
        if not self._queue_exists(name):
            try:
                sync_namespace(namespace=self.namespace, api=self.kube.custom)
            except KaiSyncError as exc:
                if exc.status is None or exc.status >= 500 or exc.status == 429:
                    raise ClusterUnavailable(f"queue sync: {exc}") from exc
                raise DispatchRefused(f"queue sync failed: {exc}", permanent=False) from exc
            if not self._queue_exists(name):
                raise DispatchRefused(f"queue {name} does not exist on the cluster (is its "
                                      f"pool archived?)", permanent=False)
        self.known_queues.add(name)

    # --- one object --------------------------------------------------------------------------
    def apply(self, obj: dict[str, Any]) -> dict:
        """The object as the API server holds it (created now, or ours already)."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        try:
            return self.objects.create(obj)
        except api_errors() as exc:
            code = status_of(exc)
            if code != 409:
                if is_transient(exc):
                    raise
                raise DispatchRefused(f"creating {kind} {name}: {describe(exc)}",
                                      permanent=code in PERMANENT_STATUSES) from exc
        existing = self.objects.read(kind, name)  # 409: it exists; adopt it if it is ours
        if not _ours(existing, obj):
            raise DispatchRefused(f"{kind} {name} already exists and is not this workflow's",
                                  permanent=True)
        if kind == "PodGroup":
            self._replace_podgroup(obj, existing)
        return existing

    def _replace_podgroup(self, desired: dict, existing: dict) -> None:
        name = desired["metadata"]["name"]
        for _attempt in range(MAX_CONFLICT_RETRIES):
            if not needs_update(desired, existing):
                return
            body = {**desired, "metadata": {
                **desired["metadata"],
                "labels": {**(existing["metadata"].get("labels") or {}),
                           **desired["metadata"]["labels"]},
                "annotations": {**(existing["metadata"].get("annotations") or {}),
                                **desired["metadata"]["annotations"]},
                "resourceVersion": existing["metadata"].get("resourceVersion")}}
            if "status" in existing:
                body["status"] = existing["status"]
            try:
                self.objects.replace_podgroup(name, body)
                return
            except api_errors() as exc:
                if status_of(exc) != 409:
                    raise
                existing = self.objects.read("PodGroup", name)
        raise ClusterUnavailable(f"PodGroup {name}: still conflicting after "
                                 f"{MAX_CONFLICT_RETRIES} attempts")
