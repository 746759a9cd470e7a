"""Plain data of the pod grouper (no Django): what a plugin decides, and the domain error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# One subgroup and one topology-constraint type for workflow specs and grouped workloads.
from scheduler.core.kai_names import (  # noqa: F401 - the grouper's names
    MIN_MEMBER_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    PREFERRED_PLACEMENT_ANNOTATION,
    QUEUE_LABEL,
    REQUIRED_PLACEMENT_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from workflows.spec.model import SubGroupSpec, TopologySpec

PRIORITY_LABEL = "priorityClassName"
TRAIN, INFERENCE = "train", "inference"


class WorkloadError(Exception):
    """A workload the grouper cannot turn into PodGroups. ``code`` is a contract code
    (``invalid_spec`` for a malformed workload, ``invalid_podgroup`` when a PodGroup breaks the
    webhook rules); ``errors`` maps a field path to messages. The API maps it to 400."""

    def __init__(self, code: str, detail: str, errors: dict[str, list[str]] | None = None):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.errors = errors or {}


@dataclass(frozen=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> OwnerRef:
        return cls(str(obj.get("apiVersion", "")), str(obj.get("kind", "")),
                   str((obj.get("metadata") or {}).get("name", "")))


@dataclass(frozen=True)
class PodGroupMeta:
    """One pod's PodGroup, as a plugin and the common rules decide it.

    ``subgroup``: the leaf this pod belongs to (None without subgroups). ``queue`` is None
    when neither the top owner nor the pod names one (the caller's default applies).
    """

    name: str
    min_member: int
    priority_class: str
    owner: OwnerRef
    grouper: str
    subgroups: tuple[SubGroupSpec, ...] = ()
    subgroup: str | None = None
    queue: str | None = None
    preemptibility: str | None = None
    topology: TopologySpec | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
