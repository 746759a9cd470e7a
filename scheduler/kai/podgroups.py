"""Workflow group → KAI PodGroup (``scheduling.run.ai/v2alpha2``) and its Pods. Pure.

As SCHEDULING.md "Workflow → PodGroup" says: one PodGroup per group in the pool's leaf queue,
``priorityClassName`` osmo-high/normal/low with an explicit ``preemptibility``, the gang fields
from the group (``GroupSpec.podgroup_spec_fields``: ``minMember`` = all pods by default, or the
``scheduling:`` block verbatim), pods labelled ``kai.scheduler/queue`` and
``kai.scheduler/subgroup-name`` (a leaf, or KAI's implicit ``default`` leaf when the group has
no subGroups), annotated ``pod-group-name`` and ``kai.scheduler/skip-podgrouper: "true"``.

Decisions where the documents are silent:

- Names: PodGroup ``{workflow}-{group}``, Pod ``{podgroup}-{task}`` (``-{i}`` per replica
  when ``replicas`` > 1), containers ``{task}``; every one a DNS label. A name that is too long
  or had to be altered (uppercase, ``_``) becomes ``<truncated>-<8 hex of sha256(original)>``,
  so it is deterministic and two originals never meet in one cleaned name.
- Label values are shortened the same way; full names ride in ``osmo/*`` annotations.
- Resources: requests for cpu / memory / ``ephemeral-storage`` when the spec gives them (else
  the pool's defaults apply elsewhere), ``nvidia.com/gpu`` in requests and limits (Kubernetes
  requires equal GPU limits). ``restartPolicy: Never``: OSMO does not retry failed tasks.
- Files, inputs and outputs are the OSMO runtime's business; the Pod keeps the command line.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.core.kai_names import (  # noqa: F401 - also this module's public names
    GPU_RESOURCE,
    GROUP_LABEL,
    GROUP_NAME_ANNOTATION,
    IMPLICIT_SUBGROUP,
    PODGROUP_ANNOTATION,
    PODGROUP_API_VERSION,
    PODGROUP_KIND,
    PRIORITY_CLASS_NAMES,
    PRIORITY_VALUES,
    QUEUE_LABEL,
    REPLICA_INDEX_ANNOTATION,
    SKIP_PODGROUPER_ANNOTATION,
    SUBGROUP_LABEL,
    TASK_LABEL,
    TASK_NAME_ANNOTATION,
    WORKFLOW_LABEL,
    WORKFLOW_NAME_ANNOTATION,
    dns_label,
    label_value,
    pod_name,
    podgroup_name,
)
from scheduler.core.kai_topology import constraint_for_kai
from workflows.spec.model import GroupSpec, TaskSpec, WorkflowSpec
from workflows.spec.units import format_bytes, format_cpu

DEFAULT_SCHEDULER_NAME = "kai-scheduler"


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    preemptibility: str


PRIORITY_CLASSES: dict[str, PriorityClass] = {
    priority: PriorityClass(PRIORITY_CLASS_NAMES[priority], PRIORITY_VALUES[priority],
                            "preemptible" if priority == "LOW" else "non-preemptible")
    for priority in ("HIGH", "NORMAL", "LOW")
}

def priority_class(priority: str) -> PriorityClass:
    try:
        return PRIORITY_CLASSES[priority.upper()]
    except (KeyError, AttributeError):
        raise ValueError(f"priority must be HIGH, NORMAL or LOW, got {priority!r}") from None


@dataclass(frozen=True)
class GroupManifests:
    podgroup: dict[str, Any]
    pods: tuple[dict[str, Any], ...]

    def all(self) -> list[dict[str, Any]]:
        """PodGroup first, then its pods (the order to create them in)."""
        return [self.podgroup, *self.pods]


def build_podgroup(
    group: GroupSpec,
    *,
    workflow_name: str,
    namespace: str,
    queue: str,
    priority: str = "NORMAL",
    labels: Mapping[str, str] | None = None,
    topology: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The PodGroup manifest of one workflow group. ``topology``: the cluster Topology's levels;
    given, the constraints name it and their levels by node label, as KAI reads them."""
    pclass = priority_class(priority)
    name = podgroup_name(workflow_name, group.name)
    spec: dict[str, Any] = {
        "queue": queue,
        "priorityClassName": pclass.name,
        "preemptibility": pclass.preemptibility,
    }
    spec.update(group.podgroup_spec_fields())
    if topology is not None:
        resolve_constraints(spec, topology)
    return {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": PODGROUP_KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                **dict(labels or {}),
                WORKFLOW_LABEL: label_value(workflow_name),
                GROUP_LABEL: label_value(group.name),
                QUEUE_LABEL: label_value(queue),
            },
            "annotations": {
                WORKFLOW_NAME_ANNOTATION: workflow_name,
                GROUP_NAME_ANNOTATION: group.name,
            },
        },
        "spec": spec,
    }


def resolve_constraints(spec: dict[str, Any], levels: Sequence[Mapping[str, Any]]) -> None:
    """A PodGroup spec's constraints (its own and its subgroups'), in place, as KAI reads them
    (:func:`scheduler.core.kai_topology.constraint_for_kai`)."""
    for holder in [spec, *(spec.get("subGroups") or [])]:
        if holder.get("topologyConstraint"):
            holder["topologyConstraint"] = constraint_for_kai(holder["topologyConstraint"],
                                                              levels)


def _resources(task: TaskSpec) -> dict[str, dict[str, str]]:
    resource = task.resource
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if resource.cpu_millicores is not None:
        requests["cpu"] = format_cpu(resource.cpu_millicores)
    if resource.memory_bytes is not None:
        requests["memory"] = format_bytes(resource.memory_bytes)
    if resource.storage_bytes is not None:
        requests["ephemeral-storage"] = format_bytes(resource.storage_bytes)
    if resource.gpus:
        requests[GPU_RESOURCE] = str(resource.gpus)
        limits[GPU_RESOURCE] = str(resource.gpus)
    out: dict[str, dict[str, str]] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _node_selector(task: TaskSpec, platforms: Mapping[str, Any] | None) -> dict[str, str]:
    if task.platform is None:
        return {}
    if platforms is None:
        return {}
    if task.platform not in platforms:
        raise ValueError(f"task '{task.name}' runs on platform '{task.platform}', which the "
                         f"pool does not define (platforms: {', '.join(sorted(platforms))})")
    platform = platforms[task.platform] or {}
    selector = platform.get("node_selector", platform.get("nodeSelector", {})) or {}
    return {str(k): str(v) for k, v in selector.items()}


def build_pods(
    group: GroupSpec,
    *,
    workflow_name: str,
    namespace: str,
    queue: str,
    priority: str = "NORMAL",
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    platforms: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ...]:
    """The Pods of one workflow group, tasks in spec order, replicas in index order.

    ``platforms``: the pool's ``{name: {description, node_selector}}``; a task's platform
    selects the nodeSelector.
    """
    pclass = priority_class(priority)
    group_pg = podgroup_name(workflow_name, group.name)
    pods: list[dict[str, Any]] = []
    for task in group.tasks:
        selector = _node_selector(task, platforms)
        subgroup = task.subgroup or IMPLICIT_SUBGROUP
        container: dict[str, Any] = {"name": dns_label(task.name), "image": task.image}
        if task.command:
            container["command"] = list(task.command)
        if task.args:
            container["args"] = list(task.args)
        if task.environment:
            container["env"] = [{"name": k, "value": v} for k, v in task.environment.items()]
        resources = _resources(task)
        if resources:
            container["resources"] = resources
        replicas = range(task.replicas) if task.replicas > 1 else [None]
        for replica in replicas:
            annotations = {
                PODGROUP_ANNOTATION: group_pg,
                SKIP_PODGROUPER_ANNOTATION: "true",
                WORKFLOW_NAME_ANNOTATION: workflow_name,
                GROUP_NAME_ANNOTATION: group.name,
                TASK_NAME_ANNOTATION: task.name,
            }
            if replica is not None:
                annotations[REPLICA_INDEX_ANNOTATION] = str(replica)
            spec: dict[str, Any] = {
                "schedulerName": scheduler_name,
                "priorityClassName": pclass.name,
                "restartPolicy": "Never",
                "containers": [copy.deepcopy(container)],
            }
            if selector:
                spec["nodeSelector"] = dict(selector)
            pods.append({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name(group_pg, task.name, replica),
                    "namespace": namespace,
                    "labels": {
                        **dict(labels or {}),
                        QUEUE_LABEL: label_value(queue),
                        SUBGROUP_LABEL: subgroup,
                        WORKFLOW_LABEL: label_value(workflow_name),
                        GROUP_LABEL: label_value(group.name),
                        TASK_LABEL: label_value(task.name),
                    },
                    "annotations": annotations,
                },
                "spec": spec,
            })
    return tuple(pods)


def build_group_manifests(
    group: GroupSpec,
    *,
    workflow_name: str,
    namespace: str,
    queue: str,
    priority: str = "NORMAL",
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    platforms: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    topology: Sequence[Mapping[str, Any]] | None = None,
) -> GroupManifests:
    """The PodGroup and Pods of one workflow group."""
    return GroupManifests(
        podgroup=build_podgroup(group, workflow_name=workflow_name, namespace=namespace,
                                queue=queue, priority=priority, labels=labels,
                                topology=topology),
        pods=build_pods(group, workflow_name=workflow_name, namespace=namespace, queue=queue,
                        priority=priority, scheduler_name=scheduler_name, platforms=platforms,
                        labels=labels),
    )


def build_workflow_manifests(
    workflow: WorkflowSpec,
    *,
    workflow_name: str,
    namespace: str,
    queue: str,
    priority: str = "NORMAL",
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    platforms: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    topology: Sequence[Mapping[str, Any]] | None = None,
) -> list[GroupManifests]:
    """One GroupManifests per group, in spec order. ``workflow_name``: the unique run name."""
    return [
        build_group_manifests(group, workflow_name=workflow_name, namespace=namespace,
                              queue=queue, priority=priority, scheduler_name=scheduler_name,
                              platforms=platforms, labels=labels, topology=topology)
        for group in workflow.groups
    ]
