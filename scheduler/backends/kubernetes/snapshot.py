"""The placement's cache → a :class:`scheduler.core.Snapshot` (objects decoded by
:mod:`scheduler.kai.decode`), and the index from the core's names back to the objects:

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

from dataclasses import dataclass, field
from typing import Any

from scheduler.core import Gang, Node, SchedulerConfig, Snapshot
from scheduler.core.collector import collector_paused
from scheduler.core.kai_names import MOVED_FROM_ANNOTATION, PODGROUP_ANNOTATION
from scheduler.core.readiness import InvalidGang, build_tree, is_ready, ready_counts
from scheduler.kai.decode import (
    Requests,
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

from .cache import FINISHED, ClusterCache
from .moves import is_leaving


def charge(totals: list[int], held) -> None:
    """Add what ``held`` (a core ``Pod`` or a pod's ``Requests``) takes to [gpus, cpu, memory]."""
    totals[0] += held.gpus
    totals[1] += held.cpu
    totals[2] += held.memory


@dataclass
class ClusterIndex:
    """The core's names back to the cluster's objects (the embedded loop's
    :class:`scheduler.snapshot.SnapshotIndex` maps them back to rows)."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod name → pod
    podgroups: dict[str, dict[str, Any]] = field(default_factory=dict)  # gang → PodGroup
    gangs: dict[str, Gang] = field(default_factory=dict)
    gang_pods: dict[str, list[str]] = field(default_factory=dict)  # gang → every live pod
    terminating: dict[str, list[Requests]] = field(default_factory=dict)  # node → held
    node_free: dict[str, list[int]] = field(default_factory=dict)  # node → real free
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # gang → why not in the snapshot
    leaving: list[dict[str, Any]] = field(default_factory=list)  # marked, not deleted
    orphans: list[dict[str, Any]] = field(default_factory=list)  # replacements of no move


@dataclass
class SnapshotMemo:
    """What earlier cycles built, reused while its sources are unchanged: each gang by name
    with what it was built from (its PodGroup and pods, their nodes) and its pods' names, and
    each pod's own facts by the pod object — the informer replaces a changed pod's dict, never
    edits it, so the same object says the same (a cycle at 4,000 pods read them all again)."""

    gangs: dict[str, tuple] = field(default_factory=dict)
    pods: dict[int, tuple] = field(default_factory=dict)  # id(pod) → (pod, *its facts)


def _facts(pod: dict[str, Any], namespace: str, scheduler_name: str) -> tuple:
    """(pod, live, key, spec.nodeName, deleting, PodGroup, ours, leaving, moved from)."""
    metadata = pod["metadata"]
    annotations = metadata.get("annotations") or {}
    return (pod, is_live(pod), f"{metadata.get('namespace')}/{metadata['name']}",
            (pod.get("spec") or {}).get("nodeName"), bool(metadata.get("deletionTimestamp")),
            annotations.get(PODGROUP_ANNOTATION),
            metadata.get("namespace") == namespace and is_ours(pod, scheduler_name),
            is_leaving(pod), bool(annotations.get(MOVED_FROM_ANNOTATION)))


def is_ours(pod: dict[str, Any], scheduler_name: str) -> bool:
    return (pod.get("spec") or {}).get("schedulerName") == scheduler_name


def is_live(pod: dict[str, Any]) -> bool:
    return ((pod.get("status") or {}).get("phase") or "Pending") not in FINISHED


def is_orphan(pod: dict[str, Any], cache: ClusterCache) -> bool:
    """A replacement whose pod was never marked moved or released (the scheduler stopped
    between the two writes, or the mark failed): it must not run beside the pod it was made
    for."""
    metadata = pod["metadata"]
    moved_from = (metadata.get("annotations") or {}).get(MOVED_FROM_ANNOTATION)
    if not moved_from:
        return False
    original = cache.pods.get(f"{metadata.get('namespace')}/{moved_from}")
    return original is not None and not is_leaving(original)


def build_snapshot(cache: ClusterCache, **options) -> tuple[Snapshot, ClusterIndex]:
    with collector_paused():
        return _build_snapshot(cache, **options)


def _build_snapshot(cache: ClusterCache, *, scheduler_name: str, now: float,
                    assumed: dict[str, str] | None = None,
                    below_min: dict[str, float] | None = None,
                    config: SchedulerConfig | None = None,
                    memo: SnapshotMemo | None = None,
                    usage: dict[str, float] | None = None) -> tuple[Snapshot, ClusterIndex]:
    """``memo``: what the previous cycles built (:class:`SnapshotMemo`); a gang whose
    PodGroup and pods are unchanged (the same or equal objects, bound nodes) is reused.
    ``usage``: historical usage per queue (time-based fair share; see ``scheduler.usage``).
    A gang's exec_timeout is its PodGroup's ``osmo/exec-timeout`` annotation (seconds)."""
    assumed = assumed or {}
    below_min = below_min or {}
    namespace = cache.namespace
    index = ClusterIndex()
    node_objects = {n["metadata"]["name"]: n for n in cache.nodes.items()}
    index.nodes = node_objects
    podgroups = {pg["metadata"]["name"]: pg for pg in cache.podgroups.items()}
    queues = tuple(queue_of(q, (usage or {}).get(q["metadata"]["name"], 0.0))
                   for q in cache.queues.items())
    queue_names = {q.name for q in queues}
    parents = {q.parent for q in queues if q.parent}

    members: dict[str, list[tuple[str, dict[str, Any], str | None]]] = {}
    foreign: dict[str, list[int]] = {name: [0, 0, 0] for name in node_objects}
    terminating: dict[str, list[int]] = {name: [0, 0, 0] for name in node_objects}
    known = memo.pods if memo is not None else {}
    facts: dict[int, tuple] = {}
    for pod in cache.pods.items():
        entry = known.get(pid := id(pod))
        if entry is None or entry[0] is not pod:
            entry = _facts(pod, namespace, scheduler_name)
        facts[pid] = entry
        _, live, key, node, deleting, group, ours, leaving, moved = entry
        if not live:
            continue
        if not node and assumed:
            node = assumed.get(key)
        mine = ours and group in podgroups
        if mine and not deleting and leaving:
            index.leaving.append(pod)  # its delete failed after the mark: done again
            deleting = True
        if mine and not deleting and moved and is_orphan(pod, cache):
            index.orphans.append(pod)
            continue
        if mine and not deleting:
            members.setdefault(group, []).append((key, pod, node))
            continue
        if node and node in node_objects:
            requests = pod_requests(pod)
            charge(terminating[node] if deleting and mine else foreign[node], requests)

    nodes = []
    for name, obj in sorted(node_objects.items()):
        gpus, cpu, memory = node_allocatable(obj)
        held = foreign[name]
        nodes.append(Node(name=name, gpus=max(0, gpus - held[0]), cpu=max(0, cpu - held[1]),
                          memory=max(0, memory - held[2]),
                          labels=(obj["metadata"].get("labels") or {}),
                          schedulable=node_schedulable(obj)))
        index.node_free[name] = [gpus - held[0], cpu - held[1], memory - held[2]]
        index.terminating[name] = terminating[name]

    gangs = []
    seen: set[str] = set()
    for name, pods in members.items():
        podgroup = podgroups[name]
        gang_name = f"{namespace}/{name}"
        queue = podgroup_queue(podgroup)
        if queue not in queue_names or queue in parents:
            index.skipped[gang_name] = (
                f"Queue {queue!r} does not exist" if queue not in queue_names
                else f"Queue {queue!r} is not a leaf queue")
            index.podgroups[gang_name] = podgroup
            index.gang_pods[gang_name] = [key for key, _, _ in pods]
            for key, pod, _ in pods:
                index.pods[key] = pod
            continue
        # The objects themselves: the same object compares by identity, a replaced one by
        # its content (a re-list's copies equal what they replace).
        signature = (podgroup, queue, below_min.get(gang_name),
                     tuple((pod, node, node in node_objects if node else True)
                           for _, pod, node in pods))
        remembered = memo.gangs.get(gang_name) if memo is not None else None
        if remembered is not None and remembered[0] == signature:
            _, gang, names = remembered
            for key, pod, _node in pods:
                index.pods[key] = pod
            if gang is not None:
                gangs.append(gang)
                index.gangs[gang_name] = gang
                index.gang_pods[gang_name] = names
            index.podgroups[gang_name] = podgroup
            seen.add(gang_name)
            continue
        subgroups = bool((podgroup.get("spec") or {}).get("subGroups"))
        core_pods = []
        priority = None
        started: list[float] = []
        for key, pod, node in pods:
            pod_priority = (pod.get("spec") or {}).get("priority")
            if priority is None and isinstance(pod_priority, int):
                priority = pod_priority
            if node and node not in node_objects:
                continue  # bound to a node that is gone: it holds nothing anywhere
            if node:
                started.append(pod_started(pod))
            index.pods[key] = pod
            core_pods.append(pod_of(key, pod, node, subgroups=subgroups))
        if not core_pods:
            if memo is not None:
                memo.gangs[gang_name] = (signature, None, [])
                seen.add(gang_name)
            continue
        gang = podgroup_gang(gang_name, podgroup, tuple(core_pods), queue=queue,
                             priority=priority,
                             running_since=min(started) if started else None,
                             below_min_since=below_min.get(gang_name))
        gangs.append(gang)
        index.gangs[gang_name] = gang
        index.podgroups[gang_name] = podgroup
        index.gang_pods[gang_name] = [p.name for p in core_pods]
        if memo is not None:
            memo.gangs[gang_name] = (signature, gang, index.gang_pods[gang_name])
            seen.add(gang_name)
    if memo is not None:
        for gang_name in set(memo.gangs) - seen:
            del memo.gangs[gang_name]
        memo.pods = facts
    snapshot = Snapshot(nodes=tuple(nodes), queues=queues, gangs=tuple(gangs),
                        topology=topology_of(cache.topologies.items()), now=now,
                        config=config or SchedulerConfig())
    return snapshot, index


def gang_ready(gang: Gang, bound: set[str]) -> bool:
    """Would ``gang`` meet its minimum with exactly the pods in ``bound`` placed?"""
    try:
        tree = build_tree(gang)
    except InvalidGang:
        return False
    return is_ready(tree, ready_counts(tree, lambda pod: pod.name in bound))
