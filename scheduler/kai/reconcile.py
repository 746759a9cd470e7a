"""Reconcile the KAI Queues and the Topology of a namespace to a real cluster: the
application of a desired set, without Django (the backend agent runs it too).

Through the official ``kubernetes`` client (``CustomObjectsApi``), by label
``osmo.namespace=<ns>``:

1. list what exists (one list per kind);
2. create what is missing and replace what differs, parents before children; a replace carries
   the ``resourceVersion`` read, and on 409 Conflict the object is re-read and the replace
   retried (bounded); a create that meets 409 AlreadyExists (an object of that name without our
   label, e.g. made by hand or left by an older run) re-reads it and adopts it by replace;
3. delete what is no longer wanted, children before parents (deepest queue first).

Idempotent: a second run against an unchanged cluster makes no writes. Any other API error
stops the run with :class:`KaiSyncError` (carrying what was done so far); the next run starts
from a fresh list, so it converges.

Decisions where the documents are silent:

- "Differs" compares ``spec`` and OSMO's own labels and annotations; labels and annotations
  that others added (kubectl, admission controllers) are kept on replace.
- A Topology's ``nodeLabel`` list is immutable (CRD CEL rule): when it changes the Topology is
  deleted and created again (reported as replaced). Placed work is not moved by this.
- Deleting an object that is already gone (404) counts as nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .queues import (
    NAMESPACE_LABEL,
    QUEUE_API_VERSION,
    QUEUE_KIND,
    TOPOLOGY_API_VERSION,
    TOPOLOGY_KIND,
    depth_order,
)

logger = logging.getLogger(__name__)

MAX_CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class Resource:
    """A cluster-scoped custom resource kind we manage."""

    api_version: str
    kind: str
    plural: str

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.split("/")[1]


QUEUES = Resource(QUEUE_API_VERSION, QUEUE_KIND, "queues")
TOPOLOGIES = Resource(TOPOLOGY_API_VERSION, TOPOLOGY_KIND, "topologies")
RESOURCES = (QUEUES, TOPOLOGIES)


@dataclass
class SyncSummary:
    """What a run did (or, with ``dry_run``, would do): ``Kind/name`` per object."""

    created: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.created or self.replaced or self.deleted)

    def as_dict(self) -> dict[str, Any]:
        return {"created": list(self.created), "replaced": list(self.replaced),
                "deleted": list(self.deleted), "unchanged": list(self.unchanged),
                "dry_run": self.dry_run}

    def counts(self) -> dict[str, int]:
        return {"created": len(self.created), "replaced": len(self.replaced),
                "deleted": len(self.deleted), "unchanged": len(self.unchanged)}


class KaiSyncError(Exception):
    """A run stopped on an API error; ``summary`` is what it had done before."""

    def __init__(self, message: str, summary: SyncSummary, status: int | None = None):
        super().__init__(message)
        self.summary = summary
        self.status = status


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status", None)


def _api_exception_types() -> tuple[type[BaseException], ...]:
    from kubernetes.client.exceptions import ApiException

    return (ApiException,)


def _key(resource: Resource, name: str) -> str:
    return f"{resource.kind}/{name}"


def _owned_metadata(manifest: Mapping[str, Any]) -> tuple[dict, dict]:
    metadata = manifest.get("metadata") or {}
    return dict(metadata.get("labels") or {}), dict(metadata.get("annotations") or {})


def needs_update(desired: Mapping[str, Any], existing: Mapping[str, Any]) -> bool:
    """True when ``existing`` lacks our spec, labels or annotations."""
    if (desired.get("spec") or {}) != (existing.get("spec") or {}):
        return True
    labels, annotations = _owned_metadata(desired)
    have_labels, have_annotations = _owned_metadata(existing)
    return any(have_labels.get(k) != v for k, v in labels.items()) or \
        any(have_annotations.get(k) != v for k, v in annotations.items())


def _replacement(desired: Mapping[str, Any], existing: Mapping[str, Any]) -> dict[str, Any]:
    """``desired`` with the existing resourceVersion and foreign labels/annotations kept."""
    labels, annotations = _owned_metadata(desired)
    have_labels, have_annotations = _owned_metadata(existing)
    metadata = dict(desired["metadata"])
    metadata["labels"] = {**have_labels, **labels}
    merged_annotations = {**have_annotations, **annotations}
    if merged_annotations:
        metadata["annotations"] = merged_annotations
    metadata["resourceVersion"] = (existing.get("metadata") or {}).get("resourceVersion")
    return {**desired, "metadata": metadata}


def _node_labels(topology: Mapping[str, Any]) -> list[str]:
    return [level.get("nodeLabel") for level in (topology.get("spec") or {}).get("levels", [])]


class _Client:
    """The few CustomObjectsApi calls we make, for one cluster-scoped resource kind."""

    def __init__(self, api: Any, resource: Resource):
        self.api = api
        self.resource = resource

    def _args(self) -> tuple[str, str, str]:
        return self.resource.group, self.resource.version, self.resource.plural

    def list(self, selector: str) -> list[dict[str, Any]]:
        return list(self.api.list_cluster_custom_object(*self._args(),
                                                        label_selector=selector)["items"])

    def get(self, name: str) -> dict[str, Any]:
        return self.api.get_cluster_custom_object(*self._args(), name)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.api.create_cluster_custom_object(*self._args(), dict(body))

    def replace(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.api.replace_cluster_custom_object(*self._args(), name, dict(body))

    def delete(self, name: str) -> None:
        self.api.delete_cluster_custom_object(*self._args(), name)


class _Run:
    def __init__(self, api: Any, namespace: str, dry_run: bool):
        self.api = api
        self.selector = f"{NAMESPACE_LABEL}={namespace}"
        self.summary = SyncSummary(dry_run=dry_run)
        self.dry_run = dry_run
        self.api_errors = _api_exception_types()

    def sync(self, resource: Resource, desired: list[dict[str, Any]]) -> None:
        client = _Client(self.api, resource)
        existing = {obj["metadata"]["name"]: obj for obj in client.list(self.selector)}
        wanted = set()
        for manifest in desired:
            name = manifest["metadata"]["name"]
            wanted.add(name)
            self._upsert(client, manifest, existing.get(name))
        extra = [obj for name, obj in existing.items() if name not in wanted]
        depths = depth_order(extra) if resource is QUEUES else {}
        for obj in sorted(extra, key=lambda o: (-depths.get(o["metadata"]["name"], 0),
                                                o["metadata"]["name"])):
            self._delete(client, obj["metadata"]["name"])

    def _upsert(self, client: _Client, desired: dict[str, Any],
                existing: dict[str, Any] | None) -> None:
        name = desired["metadata"]["name"]
        key = _key(client.resource, name)
        if existing is None:
            if self.dry_run:
                self.summary.created.append(key)
                return
            try:
                client.create(desired)
            except self.api_errors as exc:
                if _status(exc) != 409:
                    raise
                self._replace(client, desired, client.get(name))
                return
            self.summary.created.append(key)
            return
        self._replace(client, desired, existing)

    def _replace(self, client: _Client, desired: dict[str, Any],
                 existing: dict[str, Any]) -> None:
        name = desired["metadata"]["name"]
        key = _key(client.resource, name)
        for _attempt in range(MAX_CONFLICT_RETRIES):
            if not needs_update(desired, existing):
                self.summary.unchanged.append(key)
                return
            if self.dry_run:
                self.summary.replaced.append(key)
                return
            if client.resource is TOPOLOGIES and _node_labels(desired) != _node_labels(existing):
                self._recreate(client, desired)
                self.summary.replaced.append(key)
                return
            try:
                client.replace(name, _replacement(desired, existing))
            except self.api_errors as exc:
                if _status(exc) == 404:  # deleted meanwhile: make it again
                    client.create(desired)
                    self.summary.created.append(key)
                    return
                if _status(exc) != 409:
                    raise
                logger.info("kai sync: conflict replacing %s, re-reading", key)
                existing = client.get(name)
                continue
            self.summary.replaced.append(key)
            return
        raise KaiSyncError(f"{key}: still conflicting after {MAX_CONFLICT_RETRIES} attempts",
                           self.summary, status=409)

    def _recreate(self, client: _Client, desired: dict[str, Any]) -> None:
        name = desired["metadata"]["name"]
        try:
            client.delete(name)
        except self.api_errors as exc:
            if _status(exc) != 404:
                raise
        client.create(desired)

    def _delete(self, client: _Client, name: str) -> None:
        key = _key(client.resource, name)
        if not self.dry_run:
            try:
                client.delete(name)
            except self.api_errors as exc:
                if _status(exc) != 404:
                    raise
                return
        self.summary.deleted.append(key)


def sync_objects(api: Any, desired: Iterable[Mapping[str, Any]], *, namespace: str,
                 dry_run: bool = False) -> SyncSummary:
    """Make the cluster's OSMO Queues and Topology for ``namespace`` equal ``desired``.

    ``api``: a ``kubernetes.client.CustomObjectsApi``. ``desired``: manifests (Queues parents
    first, as :func:`scheduler.kai.queues.build_queue_hierarchy` orders them, and Topologies),
    each labelled ``osmo.namespace=<namespace>``.
    """
    by_kind: dict[Resource, list[dict[str, Any]]] = {resource: [] for resource in RESOURCES}
    for manifest in desired:
        resource = next((r for r in RESOURCES if r.kind == manifest.get("kind")
                         and r.api_version == manifest.get("apiVersion")), None)
        if resource is None:
            raise ValueError(f"cannot sync {manifest.get('apiVersion')} "
                             f"{manifest.get('kind')}: not a Queue or Topology")
        by_kind[resource].append(dict(manifest))
    run = _Run(api, namespace, dry_run)
    try:
        for resource in RESOURCES:
            run.sync(resource, by_kind[resource])
    except KaiSyncError:
        raise
    except run.api_errors as exc:
        raise KaiSyncError(f"Kubernetes API error {_status(exc)}: {getattr(exc, 'reason', exc)}",
                           run.summary, status=_status(exc)) from exc
    return run.summary
