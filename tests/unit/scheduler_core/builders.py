"""Small factories for snapshots, so scenarios read like the seed examples."""

from __future__ import annotations

from scheduler.core.model import (
    Gang,
    Node,
    Pod,
    Queue,
    ResourceQuota,
    SchedulerConfig,
    Snapshot,
    SubGroup,
    Topology,
    TopologyConstraint,
    TopologyLevel,
)


def queue(name: str, parent: str | None = None, quota: int = -1, limit: int = -1,
          weight: int = 1, priority: int = 100) -> Queue:
    return Queue(name, parent=parent, priority=priority,
                 gpu=ResourceQuota(quota=quota, limit=limit, over_quota_weight=weight))


def flat_queues(*names: str, **settings) -> tuple[Queue, ...]:
    """A root queue with the named leaves under it (same settings for each leaf)."""
    return (queue("root"),) + tuple(queue(name, parent="root", **settings) for name in names)


def nodes(count: int, gpus: int = 8, prefix: str = "node", labels=None) -> tuple[Node, ...]:
    """`labels(i)` gives node i's labels."""
    return tuple(Node(f"{prefix}-{i:03d}", gpus=gpus,
                      labels=labels(i) if labels else ()) for i in range(count))


def pods(prefix: str, count: int, gpus: int = 1, subgroup: str | None = None,
         node: str | None = None, **extra) -> tuple[Pod, ...]:
    return tuple(Pod(f"{prefix}-{i}", subgroup=subgroup, gpus=gpus, node=node, **extra)
                 for i in range(count))


def leaf(name: str, min_member: int, parent: str | None = None,
         required: str | None = None, preferred: str | None = None) -> SubGroup:
    constraint = TopologyConstraint(required, preferred) if (required or preferred) else None
    return SubGroup(name, parent=parent, min_member=min_member, topology=constraint)


def mid(name: str, min_subgroup: int | None = None, parent: str | None = None,
        required: str | None = None, min_member: int | None = None) -> SubGroup:
    constraint = TopologyConstraint(required) if required else None
    return SubGroup(name, parent=parent, min_subgroup=min_subgroup, min_member=min_member,
                    topology=constraint)


def gang(name: str, queue_name: str = "team", pod_list=(), subgroups=(), **fields) -> Gang:
    return Gang(name, queue_name, pods=tuple(pod_list), subgroups=tuple(subgroups), **fields)


def topology(*levels: str) -> Topology:
    return Topology(levels=tuple(TopologyLevel(level) for level in levels))


def snapshot(node_list, queue_list, gang_list, levels: Topology | None = None, now: float = 0.0,
             **config) -> Snapshot:
    return Snapshot(nodes=tuple(node_list), queues=tuple(queue_list), gangs=tuple(gang_list),
                    topology=levels or Topology(), now=now, config=SchedulerConfig(**config))


def bound_nodes(result) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}


def bound_pods_of(result, gang_name: str) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings if b.gang == gang_name}
