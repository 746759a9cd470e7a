"""What a caller that keeps them from cycle to cycle hands on each node (`Node.bound`,
`Node.releases`), and the same worked out from a snapshot's gangs: the reference any kept
ones must equal."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.model import Gang, Pod, Snapshot

INF = float("inf")


def release(gang: Gang, pod: Pod) -> tuple[float, int, int, int, str]:
    """A bound pod's entry in its node's `releases`."""
    deadline = gang.deadline
    return (INF if deadline is None else deadline, pod.gpus, pod.cpu, pod.memory, gang.name)


def total(entries) -> tuple[int, int, int]:
    """What `releases` entries (or any `(_, gpus, cpu, memory, ...)` entries) hold in all."""
    gpus = cpu = memory = 0
    for entry in entries:
        gpus += entry[1]
        cpu += entry[2]
        memory += entry[3]
    return gpus, cpu, memory


def with_node_totals(snapshot: Snapshot) -> Snapshot:
    """`snapshot` with each node's `bound` and `releases` worked out from its gangs."""
    releases: dict[str, list[tuple]] = {node.name: [] for node in snapshot.nodes}
    for gang in snapshot.gangs:
        for pod in gang.pods:
            if pod.node in releases:
                releases[pod.node].append(release(gang, pod))
    return replace(snapshot, nodes=tuple(
        replace(node, bound=total(releases[node.name]),
                releases=tuple(sorted(releases[node.name])))
        for node in snapshot.nodes))
