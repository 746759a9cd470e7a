"""KAI and Kubernetes objects, as the API server serves them (plain dicts), decoded into
``scheduler.core`` types: pods, Nodes, Queues, Topologies and PodGroups. Pure — no Django, no
client, in the core so that every app may import it — and the one reading of each: both
snapshot builders (``backends/embedded/snapshot.py``: a workflow group's stored gang fields, the
stored topology levels; ``backends/kubernetes/snapshot.py``: the informers' objects), the Node table
(``backends/kubernetes/nodes.py``), admission (a pod's requests and a gang's minimum, charged to
quota) and the pod grouper (a group's GPUs) read a pod, a Node and a gang alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from scheduler.core.kai_names import (
    DEFAULT_TOPOLOGY_LEVELS,
    DEFAULT_TOPOLOGY_NAME,
    EXEC_TIMEOUT_ANNOTATION,
    GPU_RESOURCE,
    QUEUE_LABEL,
    SUBGROUP_LABEL,
    WORKFLOW_NAME_ANNOTATION,
)
from scheduler.core.model import (
    Gang,
    Pod,
    Queue,
    ResourceQuota,
    SubGroup,
    Topology,
    TopologyConstraint,
    TopologyLevel,
)
from scheduler.core.quantities import ascii_digits, parse_bytes, parse_millicores

# Taints that only mirror what the cache reads itself (the Ready condition, spec.unschedulable);
# the node lifecycle controller keeps them in step, and admission puts ``not-ready`` on every
# new Node until that controller has seen it Ready.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                    "node.kubernetes.io/unschedulable")


@lru_cache(maxsize=1 << 16)  # pods created or started in the same second share it
def timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def quantity(parse, value) -> int:
    """`value` parsed, 0 when absent or not a quantity; the strings (the few request and
    allocatable amounts in use, as the API server returns them) parsed once."""
    return (_parsed if isinstance(value, str) else _parsed.__wrapped__)(parse, value)


@lru_cache(maxsize=1 << 12)
def _parsed(parse, value) -> int:
    try:
        return parse(value) if value is not None else 0
    except (ValueError, TypeError):
        return 0


@dataclass(frozen=True)
class Requests:
    gpus: int
    cpu: int
    memory: int


class QuantityError(ValueError):
    """A request that is not a quantity (``field``: where, as in the pod's spec)."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field, self.detail = field, detail


def whole_gpus(value) -> int:
    """GPUs are whole: an integer, or ASCII digits (int() would also read '８' or '1_000')."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else (
        ascii_digits(value) if isinstance(value, str) else None)
    if number is None or number < 0:
        raise ValueError(f"{GPU_RESOURCE} must be a whole number, got {value!r}")
    return number


_PARSERS = ((GPU_RESOURCE, whole_gpus), ("cpu", parse_millicores), ("memory", parse_bytes))
_requests_cache: dict[str, Requests] = {}


def pod_requests(pod: Mapping[str, Any], *, strict: bool = False) -> Requests:
    """What a pod asks for, as Kubernetes counts its effective request, resource by resource:
    a container's request, else its limit (the API server copies a limit into a missing
    request); the main containers summed with the sidecars (init containers with
    ``restartPolicy: Always``, which run beside them); each other init container with the
    sidecars started before it, when that is more; plus the pod's ``overhead``.

    Every reader of a pod takes it from here — the scheduler's snapshots, admission (what is
    charged to quota), the pod grouper (a group's GPUs) — so a pod is charged what it is
    scheduled on. ``strict``: a value that is not a quantity is a `QuantityError` (a submitted
    manifest); else it counts 0 (a cluster's pod, which the API server validated), and the
    reading is memoised by uid, as a pod's requests never change."""
    uid = ((pod.get("metadata") or {}).get("uid") or "") if not strict else ""
    cached = _requests_cache.get(uid) if uid else None
    if cached is not None:
        return cached
    spec = pod.get("spec") or {}

    def of(resources, path: str) -> tuple[int, ...]:
        resources = resources if isinstance(resources, Mapping) else {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        amounts = []
        for name, parse in _PARSERS:
            part, value = ("requests", requests[name]) if name in requests else (
                "limits", limits.get(name))
            if strict and value is not None:
                try:
                    amounts.append(parse(value))
                except (ValueError, TypeError) as error:
                    raise QuantityError(f"{path}.{part}.{name}", str(error)) from None
            else:
                amounts.append(quantity(parse, value))
        return tuple(amounts)

    def containers(key: str):
        for index, container in enumerate(spec.get(key) or ()):
            if isinstance(container, Mapping):
                yield container, of(container.get("resources"), f"spec.{key}[{index}].resources")

    main = [0, 0, 0]
    for _container, amounts in containers("containers"):
        main = [a + b for a, b in zip(main, amounts, strict=True)]
    sidecars, init = [0, 0, 0], [0, 0, 0]
    for container, amounts in containers("initContainers"):
        if container.get("restartPolicy") == "Always":
            sidecars = [a + b for a, b in zip(sidecars, amounts, strict=True)]
            running = sidecars
        else:
            running = [a + b for a, b in zip(sidecars, amounts, strict=True)]
        init = [max(a, b) for a, b in zip(init, running, strict=True)]
    overhead = of({"requests": spec.get("overhead") or {}}, "spec.overhead")
    result = Requests(*(max(m + s, i) + o
                        for m, s, i, o in zip(main, sidecars, init, overhead, strict=True)))
    if uid:
        if len(_requests_cache) > 200_000:
            _requests_cache.clear()
        _requests_cache[uid] = result
    return result


def pod_started(pod: dict[str, Any]) -> float:
    """When a bound pod started: after it was created, whatever its clock says."""
    return max(timestamp((pod.get("status") or {}).get("startTime")),
               timestamp(pod["metadata"].get("creationTimestamp")))


def pod_of(name: str, pod: dict[str, Any], node: str | None, *, subgroups: bool) -> Pod:
    """``pod`` as a member of its gang, named ``name``, bound (or assumed bound) to ``node``;
    its subgroup is KAI's label, read only when the PodGroup has ``subGroups``."""
    requests = pod_requests(pod)
    subgroup = (pod["metadata"].get("labels") or {}).get(SUBGROUP_LABEL) if subgroups else None
    return Pod(name=name, subgroup=subgroup, gpus=requests.gpus, cpu=requests.cpu,
               memory=requests.memory,
               node_selector=(pod.get("spec") or {}).get("nodeSelector") or {},
               node=node or None)


def node_allocatable(node: dict[str, Any]) -> tuple[int, int, int]:
    """What a Node offers pods: (GPUs, millicores, bytes), its capacity when it states no
    allocatable."""
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    return (quantity(whole_gpus, allocatable.get(GPU_RESOURCE)),
            quantity(parse_millicores, allocatable.get("cpu")),
            quantity(parse_bytes, allocatable.get("memory")))


def node_schedulable(node: Mapping[str, Any]) -> bool:
    """Whether pods may be placed on a Node: not cordoned, its ``Ready`` condition True (a
    Node that states none is not ready yet), and no ``NoSchedule`` / ``NoExecute`` taint but
    those that mirror the two (``CONDITION_TAINTS``)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    if spec.get("unschedulable"):
        return False
    ready = next((c.get("status") for c in status.get("conditions") or []
                  if c.get("type") == "Ready"), "False")
    if ready != "True":
        return False
    return not any(t.get("effect") in ("NoSchedule", "NoExecute")
                   and t.get("key") not in CONDITION_TAINTS for t in spec.get("taints") or [])


def _resource_quota(resources: dict, name: str) -> ResourceQuota:
    raw = resources.get(name) or {}
    return ResourceQuota(quota=int(raw.get("quota", -1)), limit=int(raw.get("limit", -1)),
                         over_quota_weight=int(raw.get("overQuotaWeight", 1)))


def queue_of(obj: dict[str, Any], usage: float = 0.0) -> Queue:
    spec = obj.get("spec") or {}
    resources = spec.get("resources") or {}
    return Queue(name=obj["metadata"]["name"], parent=spec.get("parentQueue") or None,
                 priority=int(spec.get("priority", 100)),
                 gpu=_resource_quota(resources, "gpu"), cpu=_resource_quota(resources, "cpu"),
                 memory=_resource_quota(resources, "memory"),
                 created_at=timestamp(obj["metadata"].get("creationTimestamp")), usage=usage)


def topology_levels(levels: Iterable[Mapping[str, Any]]) -> tuple[TopologyLevel, ...]:
    """A Topology's ``spec.levels`` (coarsest first)."""
    return tuple(TopologyLevel(node_label=level["nodeLabel"], alias=level.get("alias"))
                 for level in levels)


def topology_of(topologies: list[dict[str, Any]]) -> Topology:
    """The Topology CR named ``osmo-topology``, else the first one, else the default levels."""
    chosen = next((t for t in topologies if t["metadata"]["name"] == DEFAULT_TOPOLOGY_NAME),
                  topologies[0] if topologies else None)
    if chosen is None:
        return Topology(levels=tuple(TopologyLevel(node_label=label, alias=alias)
                                     for alias, label in DEFAULT_TOPOLOGY_LEVELS))
    return Topology(name=chosen["metadata"]["name"],
                    levels=topology_levels((chosen.get("spec") or {}).get("levels") or []))


# --- PodGroups ----------------------------------------------------------------------------

def constraint_of(raw: Mapping[str, Any] | None) -> TopologyConstraint | None:
    """A ``topologyConstraint``. One that names no level (only a ``topology``, or nothing)
    constrains nothing — KAI places such a gang as one without a constraint — so it is None,
    and the gang may, for one, be consolidated like any other."""
    if not raw:
        return None
    required = raw.get("requiredTopologyLevel") or None
    preferred = raw.get("preferredTopologyLevel") or None
    if not required and not preferred:
        return None
    return TopologyConstraint(required_level=required, preferred_level=preferred)


def _seconds(value) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds and seconds > 0 else None


def _int_or_none(value) -> int | None:
    return int(value) if isinstance(value, int) else None


def gang_of(name: str, fields: Mapping[str, Any], pods: tuple[Pod, ...], *, queue: str = "",
            **attributes) -> Gang:
    """A PodGroup's gang fields — ``minMember``, ``minSubGroup``, ``subGroups``,
    ``topologyConstraint``: its ``spec``, or the copy a workflow group keeps
    (``WorkflowGroup.gang``) — as a core Gang of ``pods``; ``attributes`` are the Gang's
    other fields (priority, times). A field of the wrong type reads as unset."""
    return Gang(
        name=name, queue=queue,
        min_member=_int_or_none(fields.get("minMember")),
        min_subgroup=_int_or_none(fields.get("minSubGroup")),
        subgroups=tuple(SubGroup(name=s["name"], parent=s.get("parent") or None,
                                 min_member=_int_or_none(s.get("minMember")),
                                 min_subgroup=_int_or_none(s.get("minSubGroup")),
                                 topology=constraint_of(s.get("topologyConstraint")))
                        for s in fields.get("subGroups") or ()),
        topology=constraint_of(fields.get("topologyConstraint")), pods=pods, **attributes)


def podgroup_queue(podgroup: dict[str, Any]) -> str:
    """The Queue a PodGroup names: ``spec.queue``, else KAI's queue label."""
    return (podgroup.get("spec") or {}).get("queue") or \
        (podgroup["metadata"].get("labels") or {}).get(QUEUE_LABEL) or ""


def podgroup_gang(name: str, podgroup: dict[str, Any], pods: tuple[Pod, ...], *, queue: str,
                  priority: int | None, **attributes) -> Gang:
    """A PodGroup of the cluster as a core Gang, as KAI reads it: its priority is its pods'
    (``priority``; 50 when none states one), preemptible below 100 unless ``preemptibility``
    says otherwise, its age the PodGroup's; its exec_timeout is the ``osmo/exec-timeout``
    annotation (seconds), its workload the workflow it names."""
    spec = podgroup.get("spec") or {}
    annotations = podgroup["metadata"].get("annotations") or {}
    workflow_name = annotations.get(WORKFLOW_NAME_ANNOTATION)
    priority = 50 if priority is None else priority
    preemptibility = spec.get("preemptibility")
    return gang_of(
        name, spec, pods, queue=queue, priority=priority,
        preemptible=preemptibility == "preemptible" or (not preemptibility and priority < 100),
        semi_preemptible=preemptibility == "semi-preemptible",
        created_at=timestamp(podgroup["metadata"].get("creationTimestamp")),
        exec_timeout=_seconds(annotations.get(EXEC_TIMEOUT_ANNOTATION)),
        workload=f"workflow {workflow_name!r}" if workflow_name else None, **attributes)
