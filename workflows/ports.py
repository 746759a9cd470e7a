"""What the workflows app reads from the scheduler app above it, declared here and provided by
it (`osmo.ports` lists every port)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from osmo.ports import Port


class GroupedPods(Protocol):
    podgroup: dict[str, Any]
    pods: Sequence[dict[str, Any]]


class GroupedPodGroup(Protocol):
    """One PodGroup of a grouped workload, with its pods."""

    manifests: GroupedPods
    gpus: int
    grouper: str  # "given" when the workload brought its own PodGroup

    @property
    def name(self) -> str: ...

    @property
    def pod_names(self) -> list[str]: ...


class WorkloadGrouping(Protocol):
    groups: Sequence[GroupedPodGroup]
    priority: str

    @property
    def gpus(self) -> int: ...

    def manifests(self) -> list[dict[str, Any]]: ...


class Scheduling(Protocol):
    def cluster_namespace(self) -> str:
        """The namespace the stored KAI manifests name (the default backend's)."""

    def logs_copied_live(self, backends: set[str | None]) -> bool:
        """Running pods' logs reach the store while someone reads them: on a Kubernetes
        backend among ``backends`` (None: a group not placed yet), copied by its in-process
        backend or its agent; the embedded cluster writes its lines itself."""

    def topologies(self) -> Mapping[str, list[dict]]:
        """The Topologies a spec's constraints may name (read on first use only)."""

    def workflow_manifests(self, *, spec, workflow_name: str, pool, priority: str
                           ) -> list[dict[str, Any]]:
        """A workflow's KAI PodGroup and Pod manifests, as they would be dispatched."""

    def group_workload(self, manifest: Any, *, namespace: str, default_queue: str,
                       allowed_queues: set[str], priority: str | None, name_prefix: str,
                       max_pods: int, max_subgroups: int) -> WorkloadGrouping:
        """The pod grouper: a workload's PodGroups and pods; a workload it cannot group is an
        `OsmoError` (400)."""

    def largest_node_gpus(self, node_selector: Mapping[str, str]) -> int | None:
        """The most GPUs one schedulable node with these labels has; None when no
        schedulable node has them."""

    def pending_reasons(self, workflow_names: list[str]) -> Mapping[str, Mapping[str, str]]:
        """The first reason the scheduler gives for a pending gang of each workflow named:
        `{group, code, message}`; a workflow with none is left out."""


scheduling: Port[Scheduling] = Port("workflows.ports.scheduling")


class Apps(Protocol):
    def app_version(self, *, app_uuid: str, version: int | None) -> tuple[str, str, int]:
        """(uuid, name, version) of the app version a submission names (the newest when
        ``version`` is None); an unknown app or version is a `NotFound` (404)."""


apps: Port[Apps] = Port("workflows.ports.apps")
