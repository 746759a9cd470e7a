"""The ``scheduling:`` extension of a workflow group (see EXTENSIONS.md).

The block mirrors the KAI PodGroup fields one to one, so whatever a user writes is exactly what
the PodGroup gets (the seeds' examples come out byte-for-byte). Validation is not duplicated:
the would-be PodGroup and its pods are handed to ``scheduler.core.podgroup_validation`` and its
findings are mapped back to spec paths (``spec.subGroups[2].minSubGroup`` →
``workflow.groups[0].scheduling.subGroups[2].minSubGroup``; a pod's subgroup label → the task's
``subGroup``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.core.podgroup_validation import (
    IMPLICIT_SUBGROUP,
    PODGROUP_ANNOTATION,
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    SUBGROUP_LABEL,
    normalize_topology_constraints,
    validate_podgroup,
)
from workflows.spec.errors import ErrorCollector
from workflows.spec.model import SubGroupSpec, TopologySpec

SCHEDULING_KEYS = ("minMember", "minSubGroup", "topologyConstraint", "topologyConstraints",
                   "subGroups")
SUBGROUP_KEYS = ("name", "parent", "minMember", "minSubGroup", "topologyConstraint")
# A stand-in name: only the shape is validated here, the real name comes from the builder.
_WOULD_BE_NAME = "would-be-podgroup"


@dataclass(frozen=True)
class SchedulingResult:
    min_member: int | None
    min_sub_group: int | None
    topology: TopologySpec | None
    subgroups: tuple[SubGroupSpec, ...]


def topology_from_manifest(raw: object) -> TopologySpec | None:
    if not isinstance(raw, Mapping):
        return None
    return TopologySpec(
        required_level=_str_or_none(raw.get("requiredTopologyLevel")),
        preferred_level=_str_or_none(raw.get("preferredTopologyLevel")),
        topology=_str_or_none(raw.get("topology")),
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_block_shape(raw: object, path: str, errors: ErrorCollector) -> dict[str, Any] | None:
    """Reject unknown keys (a typo here silently changes gang semantics) and wrong shapes."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        errors.add(path, "must be an object (minMember, minSubGroup, topologyConstraint, "
                         "topologyConstraints, subGroups)")
        return None
    errors.unknown_keys(raw, SCHEDULING_KEYS, path, "scheduling field")
    subgroups = raw.get("subGroups")
    if subgroups is not None:
        if not isinstance(subgroups, list):
            errors.add(f"{path}.subGroups", "must be a list of subgroups")
        else:
            for index, entry in enumerate(subgroups):
                if not isinstance(entry, Mapping):
                    continue  # the validator reports it
                errors.unknown_keys(entry, SUBGROUP_KEYS, f"{path}.subGroups[{index}]",
                                    "subgroup field")
    return {key: raw[key] for key in SCHEDULING_KEYS if key in raw}


def leaf_names(block: Mapping[str, Any]) -> set[str]:
    """Names of subgroups nobody names as parent (tasks may only target those)."""
    entries = [e for e in block.get("subGroups") or [] if isinstance(e, Mapping)]
    parents = {e.get("parent") for e in entries}
    return {e.get("name") for e in entries if e.get("name") not in parents}  # type: ignore[misc]


def resolve_scheduling(
    block: Mapping[str, Any],
    *,
    group_path: str,
    task_pods: list[tuple[str, str, str | None, int]],
    errors: ErrorCollector,
    topologies: Mapping[str, object] | None,
    default_topology: str | None,
    enforce: bool,
) -> SchedulingResult:
    """Validate the block as the would-be PodGroup and turn it into dataclasses.

    ``task_pods``: (task path, task name, leaf subgroup or None, replicas) per task. A task
    without a subgroup in a group with subGroups is the parser's to report, so it is left out.
    With ``enforce`` False the validator's findings are not reported (to inspect shapes).
    """
    spec: dict[str, Any] = dict(block)
    has_subgroups = bool(spec.get("subGroups"))
    pods: list[dict[str, Any]] = []
    pod_task_paths: list[str] = []
    for task_path, task_name, subgroup, replicas in task_pods:
        if subgroup is None and has_subgroups:
            continue
        labels = {SUBGROUP_LABEL: subgroup if subgroup is not None else IMPLICIT_SUBGROUP}
        for _ in range(replicas):
            pods.append({
                "metadata": {
                    "name": task_name,
                    "labels": labels,
                    "annotations": {PODGROUP_ANNOTATION: _WOULD_BE_NAME},
                }
            })
            pod_task_paths.append(task_path)
    manifest = {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": PODGROUP_KIND,
        "metadata": {"name": _WOULD_BE_NAME},
        "spec": spec,
    }
    kwargs: dict[str, Any] = {"topologies": topologies}
    if default_topology:
        kwargs["default_topology"] = default_topology
    result = validate_podgroup(manifest, pods, **kwargs)
    scheduling_path = f"{group_path}.scheduling"
    if enforce:
        for issue in result.errors:
            errors.add(_map_path(issue.path, scheduling_path, pod_task_paths),
                       _map_message(issue.path, issue.message))
    for issue in result.warnings:
        errors.warn(_map_path(issue.path, scheduling_path, pod_task_paths),
                    _map_message(issue.path, issue.message))

    normalized, _ = normalize_topology_constraints(spec)
    subgroups: list[SubGroupSpec] = []
    for entry in normalized.get("subGroups") or []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        subgroups.append(SubGroupSpec(
            name=entry["name"],
            parent=_str_or_none(entry.get("parent")),
            min_member=_int_or_none(entry.get("minMember")),
            min_sub_group=_int_or_none(entry.get("minSubGroup")),
            topology=topology_from_manifest(entry.get("topologyConstraint")),
        ))
    return SchedulingResult(
        min_member=_int_or_none(normalized.get("minMember")),
        min_sub_group=_int_or_none(normalized.get("minSubGroup")),
        topology=topology_from_manifest(normalized.get("topologyConstraint")),
        subgroups=tuple(subgroups),
    )


def _map_message(path: str, message: str) -> str:
    """Would-be pods are named after their task: say "task" to the OSMO user."""
    if path.startswith("pods[") and message.startswith("pod '"):
        return "task '" + message[len("pod '"):]
    return message


def _map_path(path: str, scheduling_path: str, pod_task_paths: list[str]) -> str:
    if path == "spec":
        return scheduling_path
    if path.startswith("spec."):
        return f"{scheduling_path}.{path[len('spec.'):]}"
    if path.startswith("pods["):
        index = int(path[len("pods["):path.index("]")])
        return f"{pod_task_paths[index]}.subGroup"
    return scheduling_path
