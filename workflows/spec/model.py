"""The parsed, validated workflow: frozen dataclasses in normalized units.

Units: GPUs are whole integers; CPU in millicores; memory and storage in bytes. ``None`` for
cpu/memory/storage means "not given: the pool's defaults apply" (parallel_tasks.yaml has no
``resources:`` block at all). Mapping fields are read-only views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class TopologySpec:
    """A KAI topology constraint: levels by alias (``rack``) or node label."""

    required_level: str | None = None
    preferred_level: str | None = None
    topology: str | None = None

    def to_manifest(self) -> dict[str, str]:
        """KAI's field order (Go struct order), only the fields that are set."""
        out: dict[str, str] = {}
        if self.preferred_level:
            out["preferredTopologyLevel"] = self.preferred_level
        if self.required_level:
            out["requiredTopologyLevel"] = self.required_level
        if self.topology:
            out["topology"] = self.topology
        return out


@dataclass(frozen=True)
class TopologyRequirement:
    """OSMO's per-resource ``topology:`` entry: tasks sharing ``group`` share a ``key`` domain."""

    key: str
    group: str = "default"
    required: bool = True


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    gpus: int = 0
    cpu_millicores: int | None = None
    memory_bytes: int | None = None
    storage_bytes: int | None = None
    platform: str | None = None
    topology: tuple[TopologyRequirement, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=_empty)


@dataclass(frozen=True)
class FileSpec:
    path: str
    contents: str
    localpath: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    lead: bool
    resource: ResourceSpec
    platform: str | None
    """The resource's platform, else the pool's default platform passed to the parser."""
    replicas: int = 1
    subgroup: str | None = None
    """Leaf subgroup of this task's pods; None when the group has no subGroups."""
    depends_on: tuple[str, ...] = ()
    """Task names from ``inputs: - task: X``."""
    inputs: tuple[Mapping[str, Any], ...] = ()
    outputs: tuple[Mapping[str, Any], ...] = ()
    files: tuple[FileSpec, ...] = ()
    environment: Mapping[str, str] = field(default_factory=_empty)
    credentials: Mapping[str, str | Mapping[str, str] | None] = field(default_factory=_empty)
    """OSMO's ``credentials:``: the submitter's credential name → a mount path (its keys as
    files), an env mapping (variable → key), or None (a REGISTRY credential: image pulls)."""
    exit_actions: Mapping[str, str] = field(default_factory=_empty)
    """`exitActions`: COMPLETE / FAIL / RESCHEDULE → exit codes ("1-5,10")."""
    path: str = ""
    """Where the task sits in the submitted spec (``workflow.groups[0].tasks[1]``)."""

    @property
    def gpus(self) -> int:
        """GPUs of all replicas of the task."""
        return self.resource.gpus * self.replicas


@dataclass(frozen=True)
class SubGroupSpec:
    name: str
    parent: str | None = None
    min_member: int | None = None
    min_sub_group: int | None = None
    topology: TopologySpec | None = None

    def to_manifest(self) -> dict[str, Any]:
        """A PodGroup ``spec.subGroups`` entry, in the seeds' key order."""
        out: dict[str, Any] = {"name": self.name}
        if self.parent is not None:
            out["parent"] = self.parent
        if self.min_member is not None:
            out["minMember"] = self.min_member
        if self.min_sub_group is not None:
            out["minSubGroup"] = self.min_sub_group
        if self.topology is not None:
            out["topologyConstraint"] = self.topology.to_manifest()
        return out


@dataclass(frozen=True)
class GroupSpec:
    name: str
    tasks: tuple[TaskSpec, ...]
    lead: str
    """Name of the lead task."""
    depends_on: tuple[str, ...] = ()
    """Names of the groups this group waits for (from its tasks' ``inputs``)."""
    min_member: int | None = None
    min_sub_group: int | None = None
    topology: TopologySpec | None = None
    subgroups: tuple[SubGroupSpec, ...] = ()
    path: str = ""

    @property
    def gpus(self) -> int:
        """Σ GPUs of the group's tasks × replicas: what must fit in the quota at once."""
        return sum(task.gpus for task in self.tasks)

    @property
    def pod_count(self) -> int:
        return sum(task.replicas for task in self.tasks)

    def task(self, name: str) -> TaskSpec:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(name)

    def podgroup_spec_fields(self) -> dict[str, Any]:
        """The gang fields of this group's PodGroup spec (no queue/priority), in seed order.

        No ``scheduling:`` block → ``minMember`` = all pods, KAI's plain gang.
        """
        out: dict[str, Any] = {}
        if self.min_member is not None:
            out["minMember"] = self.min_member
        elif self.min_sub_group is None and not self.subgroups:
            out["minMember"] = self.pod_count
        if self.min_sub_group is not None:
            out["minSubGroup"] = self.min_sub_group
        if self.topology is not None:
            out["topologyConstraint"] = self.topology.to_manifest()
        if self.subgroups:
            out["subGroups"] = [subgroup.to_manifest() for subgroup in self.subgroups]
        return out


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    groups: tuple[GroupSpec, ...]
    resources: Mapping[str, ResourceSpec]
    version: int = 2
    labels: Mapping[str, str] = field(default_factory=_empty)
    pool: str | None = None
    exec_timeout_seconds: int | None = None
    queue_timeout_seconds: int | None = None
    undefined_variables: tuple[str, ...] = ()
    """Template variables that had no value and rendered empty (see templating)."""
    rendered_text: str | None = None
    """The spec text after templating (None when the input was already a mapping)."""
    warnings: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)

    @property
    def tasks(self) -> tuple[TaskSpec, ...]:
        return tuple(task for group in self.groups for task in group.tasks)

    @property
    def total_gpus(self) -> int:
        """Σ GPUs of all tasks (admission check 4)."""
        return sum(group.gpus for group in self.groups)

    @property
    def max_group_gpus(self) -> int:
        """The largest group's GPUs (admission check 5: a group that could never fit)."""
        return max((group.gpus for group in self.groups), default=0)

    def group(self, name: str) -> GroupSpec:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(name)
