"""The placement's cache → a :class:`scheduler.core.Snapshot` (objects decoded by
:mod:`scheduler.core.decode`), and the index from the core's names back to the objects:

- nodes: allocatable ``nvidia.com/gpu`` / cpu / memory minus what bound pods that are not in a
  gang of this snapshot hold (other schedulers' pods, pods without a PodGroup, terminating
  ones); schedulable unless cordoned, not Ready, or tainted ``NoSchedule`` / ``NoExecute``
  (other than the taints that mirror those two); labels as they are (the topology levels);
- queues: the Queue CRs (``scheduling.run.ai/v2``), ours and anyone's;
- gangs: every PodGroup of the namespace with pods of ours (``schedulerName`` =
  ``OSMO_SCHEDULER_NAME``) that are pending or bound and not terminating — a PodGroup made by
  a user or another controller is scheduled the same way (KAI's external PodGroups); its
  priority is the pods' resolved ``spec.priority``, preemptible below 100 unless
  ``preemptibility`` says otherwise (KAI's rule);
- the topology: the Topology CR named ``osmo-topology`` (else the first one; else the default
  levels).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from sys import intern
from typing import Any

from scheduler.core import Gang, Node, SchedulerConfig, Snapshot
from scheduler.core.collector import collector_paused
from scheduler.core.decode import (
    node_allocatable,
    node_schedulable,
    pod_of,
    pod_requests,
    pod_started,
    podgroup_gang,
    podgroup_queue,
    queue_of,
    topology_of,
)
from scheduler.core.node_totals import INF, release, total
from scheduler.core.readiness import InvalidGang, build_tree, is_ready, ready_counts

from .cache import ClusterCache
from .snapshot_memo import FOREIGN, LEAVING, ORPHAN, TERMINATING, MemberPods, SnapshotMemo

ZERO = (0, 0, 0)


def charge(totals: list[int], held) -> None:
    """Add what ``held`` (a core ``Pod`` or a pod's ``Requests``) takes to [gpus, cpu, memory]."""
    totals[0] += held.gpus
    totals[1] += held.cpu
    totals[2] += held.memory


@dataclass
class ClusterIndex:
    """The core's names back to the cluster's objects (the embedded loop's
    :class:`scheduler.snapshot.SnapshotIndex` maps them back to rows)."""

    pods: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # member pod → pod
    podgroups: dict[str, dict[str, Any]] = field(default_factory=dict)  # gang → PodGroup
    gangs: dict[str, Gang] = field(default_factory=dict)
    gang_pods: dict[str, list[str]] = field(default_factory=dict)  # gang → every live pod
    terminating: dict[str, list[int]] = field(default_factory=dict)  # node → held
    node_free: dict[str, list[int]] = field(default_factory=dict)  # node → real free
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # gang → why not in the snapshot
    leaving: list[dict[str, Any]] = field(default_factory=list)  # marked, not deleted
    orphans: list[dict[str, Any]] = field(default_factory=list)  # replacements of no move


def build_snapshot(cache: ClusterCache, *, memo: SnapshotMemo | None = None,
                   **options) -> tuple[Snapshot, ClusterIndex]:
    """``memo``: what the previous cycles built (:mod:`.snapshot_memo`; a new one when None),
    brought up to the cache; only its dirty gangs are built again. A build that fails leaves
    the memo empty: its journals were read and their changes half placed, so the next build
    reads everything."""
    memo = memo if memo is not None else SnapshotMemo()
    with collector_paused():
        try:
            return _build_snapshot(cache, memo, **options)
        except BaseException:
            memo.forget()
            raise


def _build_snapshot(cache: ClusterCache, memo: SnapshotMemo, *, scheduler_name: str,
                    now: float, assumed: dict[str, str] | None = None,
                    below_min: dict[str, float] | None = None,
                    config: SchedulerConfig | None = None,
                    usage: dict[str, float] | None = None) -> tuple[Snapshot, ClusterIndex]:
    """``usage``: historical usage per queue (time-based fair share; see ``scheduler.usage``).
    A gang's exec_timeout is its PodGroup's ``osmo/exec-timeout`` annotation (seconds)."""
    memo.refresh(cache, scheduler_name=scheduler_name, assumed=assumed or {},
                 below_min=below_min or {})
    index = ClusterIndex(pods=MemberPods(memo.pods), leaving=list(memo.marked[LEAVING].values()),
                         orphans=list(memo.marked[ORPHAN].values()))
    queues = tuple(queue_of(q, (usage or {}).get(q["metadata"]["name"], 0.0))
                   for q in cache.queues.items())
    index.nodes = {intern(n["metadata"]["name"]): n for n in cache.nodes.items()}
    queue_names = {q.name for q in queues}
    parents = {q.parent for q in queues if q.parent}
    shape = (frozenset(index.nodes), frozenset(queue_names), frozenset(parents))
    if shape != memo.shape:  # a node or queue came or went: every gang may read differently
        memo.shape = shape
        memo.dirty.update(memo.members)
    for group in memo.dirty:
        memo.keep_gang(group, _gang(cache.namespace, group, memo, index.nodes, queue_names,
                                    parents) if group in memo.members else None)
    memo.dirty = set()
    nodes = _nodes(memo, index)
    gangs = []
    for gang_name, podgroup, gang, names, skipped, _holds in memo.gangs.values():
        if skipped is not None:
            index.skipped[gang_name] = skipped
        elif gang is None:
            continue
        else:
            gangs.append(gang)
            index.gangs[gang_name] = gang
        index.podgroups[gang_name] = podgroup
        index.gang_pods[gang_name] = names
    snapshot = Snapshot(nodes=nodes, queues=queues, gangs=tuple(gangs),
                        topology=topology_of(cache.topologies.items()), now=now,
                        config=config or SchedulerConfig())
    return snapshot, index


def _nodes(memo: SnapshotMemo, index: ClusterIndex) -> tuple[Node, ...]:
    """The core's nodes: allocatable minus what pods outside the snapshot's gangs hold
    (foreign pods, and the bound pods of gangs left out of it), with what the gangs' bound pods
    hold and when they release it (``Node.bound``, ``Node.releases``); each node's ``Node``
    kept while its object and those are unchanged. The index's real free and terminating
    totals."""
    foreign, left_out = memo.held[FOREIGN], memo.left_out
    terminating = memo.held[TERMINATING]
    built = {}
    for name in sorted(index.nodes):
        obj = index.nodes[name]
        held = tuple(map(sum, zip(foreign.get(name) or ZERO, left_out.get(name) or ZERO,
                                  strict=True)))
        kept = memo.nodes.get(name)
        if kept is not None and name not in memo.moved_releases:
            releases, on = kept[3].releases, kept[3].bound
        else:
            releases = tuple(sorted(chain.from_iterable(memo.releases.get(name, {}).values())))
            on = total(releases)
        if (kept is None or kept[0] is not obj or kept[1] != held
                or kept[3].releases is not releases):
            gpus, cpu, memory = node_allocatable(obj)
            free = (gpus - held[0], cpu - held[1], memory - held[2])
            kept = (obj, held, free,
                    Node(name=name, gpus=max(0, free[0]), cpu=max(0, free[1]),
                         memory=max(0, free[2]), labels=(obj["metadata"].get("labels") or {}),
                         schedulable=node_schedulable(obj), bound=on, releases=releases))
        built[name] = kept
        index.node_free[name] = list(kept[2])
        index.terminating[name] = list(terminating.get(name) or ZERO)
    memo.nodes = built
    memo.moved_releases = set()
    return tuple(kept[3] for kept in built.values())


def _gang(namespace: str, group: str, memo: SnapshotMemo, nodes: dict[str, Any],
          queue_names: set[str], parents: set[str]) -> tuple:
    """(gang name, PodGroup, Gang or None, its pods' names, why skipped or None, its bound
    pods per node as ``Node.releases`` entries) of ``group``'s members: a pod bound to a node
    that is gone holds nothing anywhere and is left out. A skipped gang's bound pods still hold
    their nodes."""
    podgroup, members = memo.podgroups[group], memo.members[group]
    gang_name = f"{namespace}/{group}"
    queue = podgroup_queue(podgroup)
    bound: dict[str, list[tuple]] = {}
    if queue not in queue_names or queue in parents:
        for pod, node in members.values():
            if node in nodes:
                held = pod_requests(pod)
                bound.setdefault(node, []).append(
                    (INF, held.gpus, held.cpu, held.memory, gang_name))
        return (gang_name, podgroup, None, list(members),
                f"Queue {queue!r} does not exist" if queue not in queue_names
                else f"Queue {queue!r} is not a leaf queue", bound)
    subgroups = bool((podgroup.get("spec") or {}).get("subGroups"))
    core_pods = []
    priority = None
    started: list[float] = []
    for key, (pod, node) in members.items():
        pod_priority = (pod.get("spec") or {}).get("priority")
        if priority is None and isinstance(pod_priority, int):
            priority = pod_priority
        if node and node not in nodes:
            continue
        if node:
            started.append(pod_started(pod))
        core_pods.append(pod_of(key, pod, node, subgroups=subgroups))
    if not core_pods:
        return gang_name, podgroup, None, [], None, bound
    gang = podgroup_gang(gang_name, podgroup, tuple(core_pods), queue=queue, priority=priority,
                         running_since=min(started) if started else None,
                         below_min_since=memo.below_min.get(gang_name))
    for core_pod in core_pods:
        if core_pod.node:
            bound.setdefault(core_pod.node, []).append(release(gang, core_pod))
    return gang_name, podgroup, gang, [p.name for p in core_pods], None, bound


def gang_ready(gang: Gang, bound: set[str]) -> bool:
    """Would ``gang`` meet its minimum with exactly the pods in ``bound`` placed?"""
    try:
        tree = build_tree(gang)
    except InvalidGang:
        return False
    return is_ready(tree, ready_counts(tree, lambda pod: pod.name in bound))
