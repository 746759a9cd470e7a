"""The owner walk: from a pod up its ``ownerReferences`` to the top owner (seed 004).

``lookup(api_version, kind, name)`` returns the owner object or None. The controller reference
is followed when there is one (as Kubernetes garbage collection does), else the first.
An owner that cannot be found ends the walk: the last object found is the top owner (KAI
would retry until the cache has it; a submitted manifest list is complete or never will be).

Skip-top-owner kinds (Argo Workflow, Kubeflow TrainJob, Dynamo graph) delegate to the owner
below them, with their labels copied over it (they win, as in KAI), repeatedly, so a TrainJob
under an Argo Workflow also delegates; when nothing is below, the pod itself is the owner.
Kinds match by API group and kind, any version.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SKIP_TOP_OWNER_KINDS: frozenset[tuple[str, str]] = frozenset({
    ("argoproj.io", "Workflow"),
    ("trainer.kubeflow.org", "TrainJob"),
    ("nvidia.com", "DynamoGraphDeployment"),
})
MAX_DEPTH = 32

Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


def group_kind(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind", ""))


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    refs = [r for r in refs if isinstance(r, Mapping)]
    if not refs:
        return None
    return next((r for r in refs if r.get("controller")), refs[0])


def index_lookup(objects: Iterable[Mapping[str, Any]]) -> Lookup:
    """A lookup over a list of manifests (by group, kind and name; any version)."""
    index: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for obj in objects:
        group, kind = group_kind(obj)
        index[(group, kind, str((obj.get("metadata") or {}).get("name", "")))] = obj

    def lookup(api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        return index.get((api_version.rpartition("/")[0], kind, name))

    return lookup


@dataclass(frozen=True)
class OwnerChain:
    """``owners``: the pod's direct owner first, the grouping top owner last (after skips).
    ``skipped``: the skip-top-owner objects that delegated, outermost first."""

    pod: Mapping[str, Any]
    owners: tuple[Mapping[str, Any], ...]
    skipped: tuple[Mapping[str, Any], ...] = ()

    @property
    def top(self) -> Mapping[str, Any]:
        return self.owners[-1] if self.owners else self.pod


def owner_chain(pod: Mapping[str, Any], lookup: Lookup) -> OwnerChain:
    owners: list[Mapping[str, Any]] = []
    current: Mapping[str, Any] = pod
    seen: set[tuple[str, str, str]] = set()
    for _ in range(MAX_DEPTH):
        ref = controller_ref(current)
        if ref is None:
            break
        key = (str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", "")))
        if key in seen:
            break
        seen.add(key)
        owner = lookup(*key)
        if owner is None:
            break
        owners.append(owner)
        current = owner
    skipped: list[Mapping[str, Any]] = []
    while owners and group_kind(owners[-1]) in SKIP_TOP_OWNER_KINDS:
        skipped.append(owners.pop())
    if skipped:
        labels: dict[str, str] = {}
        for skipped_owner in reversed(skipped):  # the outermost owner's labels win
            labels.update((skipped_owner.get("metadata") or {}).get("labels") or {})
        target = copy.deepcopy(dict(owners[-1] if owners else pod))
        target.setdefault("metadata", {})
        target["metadata"]["labels"] = {**(target["metadata"].get("labels") or {}), **labels}
        if owners:
            owners[-1] = target
        else:
            pod = target
    return OwnerChain(pod=pod, owners=tuple(owners), skipped=tuple(skipped))
