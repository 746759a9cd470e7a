"""KAI and Kubernetes objects, as the API server serves them (plain dicts), decoded into
``scheduler.core`` types. Pure — no Django, no client — so that every snapshot builder may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.core import Queue, ResourceQuota, Topology, TopologyConstraint, TopologyLevel
from scheduler.core.kai_names import DEFAULT_TOPOLOGY_LEVELS, DEFAULT_TOPOLOGY_NAME, GPU_RESOURCE
from workflows.spec.units import parse_bytes, parse_millicores

# Taints that only mirror what the cache reads itself (the Ready condition, spec.unschedulable);
# the node lifecycle controller keeps them in step, and admission puts ``not-ready`` on every
# new Node until that controller has seen it Ready.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                    "node.kubernetes.io/unschedulable")


def timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def quantity(parse, value) -> int:
    try:
        return parse(value) if value is not None else 0
    except (ValueError, TypeError):
        return 0


@dataclass
class Requests:
    gpus: int
    cpu: int
    memory: int


_requests_cache: dict[str, Requests] = {}


def pod_requests(pod: dict[str, Any]) -> Requests:
    """What a pod asks for: its containers' requests summed (GPUs from limits when requests
    omit them), the largest init container when that is more (Kubernetes' effective request).
    Memoised by uid: a pod's requests never change."""
    uid = (pod.get("metadata") or {}).get("uid") or ""
    cached = _requests_cache.get(uid) if uid else None
    if cached is not None:
        return cached

    def of(container) -> tuple[int, int, int]:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        gpus = requests.get(GPU_RESOURCE, limits.get(GPU_RESOURCE))
        return (quantity(lambda v: int(str(v)), gpus),
                quantity(parse_millicores, requests.get("cpu")),
                quantity(parse_bytes, requests.get("memory")))

    spec = pod.get("spec") or {}
    total = [0, 0, 0]
    for container in spec.get("containers") or []:
        total = [a + b for a, b in zip(total, of(container), strict=True)]
    for container in spec.get("initContainers") or []:
        total = [max(a, b) for a, b in zip(total, of(container), strict=True)]
    result = Requests(*total)
    if uid:
        if len(_requests_cache) > 200_000:
            _requests_cache.clear()
        _requests_cache[uid] = result
    return result


def node_schedulable(node: dict[str, Any]) -> bool:
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


def topology_of(topologies: list[dict[str, Any]]) -> Topology:
    chosen = next((t for t in topologies if t["metadata"]["name"] == DEFAULT_TOPOLOGY_NAME),
                  topologies[0] if topologies else None)
    if chosen is None:
        return Topology(levels=tuple(TopologyLevel(node_label=label, alias=alias)
                                     for alias, label in DEFAULT_TOPOLOGY_LEVELS))
    levels = (chosen.get("spec") or {}).get("levels") or []
    return Topology(name=chosen["metadata"]["name"],
                    levels=tuple(TopologyLevel(node_label=level["nodeLabel"],
                                               alias=level.get("alias"))
                                 for level in levels))


def _constraint(raw: dict | None) -> TopologyConstraint | None:
    if not raw:
        return None
    required, preferred = raw.get("requiredTopologyLevel"), raw.get("preferredTopologyLevel")
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
