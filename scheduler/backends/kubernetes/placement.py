"""``OSMO_PLACEMENT=osmo``: the backend leader places pods itself, as KAI Scheduler would.

The cycle reads a cache, never the API server: informers (:mod:`.informer`) of Nodes, Pods (of
every namespace: bound pods of any scheduler hold capacity), PodGroups of our namespace, Queues
and Topologies. :func:`build_snapshot` turns the cache into a :class:`scheduler.core.Snapshot`:

- nodes: allocatable ``nvidia.com/gpu`` / cpu / memory minus what bound pods that are not in a
  gang of this snapshot hold (other schedulers' pods, pods without a PodGroup, terminating
  ones); schedulable unless cordoned, not Ready, or tainted ``NoSchedule`` / ``NoExecute``
  (other than the taints that mirror those two: :data:`CONDITION_TAINTS`);
  labels as they are (the topology levels);
- queues: the Queue CRs (``scheduling.run.ai/v2``), ours and anyone's;
- gangs: every PodGroup of the namespace with pods of ours (``schedulerName`` =
  ``OSMO_SCHEDULER_NAME``) that are pending or bound and not terminating — a PodGroup made by
  a user or another controller is scheduled the same way (KAI's external PodGroups); its
  priority is the pods' resolved ``spec.priority``, preemptible below 100 unless
  ``preemptibility`` says otherwise (KAI's rule);
- the topology: the Topology CR named ``osmo-topology`` (else the first one; else the default
  levels).

Then the same :func:`scheduler.core.run_cycle` decides, and :class:`Placement` applies:

1. evictions: a ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``, as KAI and
   kube-scheduler write it; ``EvictionByScheduler`` for stale gangs) through ``pods/status``,
   a graceful delete, and an Event on the pod. The status listener maps them as for KAI.
2. consolidation moves (:mod:`.moves`): the moved pod's replacement is created first, then the
   pod is marked (``DisruptionTarget``, reason ``ConsolidationByScheduler``), deleted and given
   a ``Moved`` Event; the replacement is bound to its target with the bindings. A replacement
   whose pod was never marked (a stop between the two writes) is deleted.
3. bindings, per gang, all pods of a gang in one cycle, through ``pods/binding``. Before the
   first write the gang is checked against the newest cache — every pod still there, unbound
   and not terminating, every node still there and schedulable, and the node's real free
   capacity (terminating pods still hold theirs: a preemptor waits until its victims are
   gone, KAI's pipelining) — and deferred whole when any check fails. A bind that fails
   anyway: ``409`` (bound meanwhile by someone else) counts as bound, and the pod is read: on
   another node than planned, it may leave that node short of room for what this cycle bound
   there — then pods this cycle bound there are deleted (reason ``BindingConflict``; they
   never ran) until the node has room, so no node holds more than its allocatable; ``404``
   (deleted) does not count. A gang left below its minimum is completed in the next cycles
   when it still has the pods to reach it, else undone (the pods bound in this cycle are
   deleted, reason ``GangIncomplete``) and explained.
4. PodGroup status: ``schedulingConditions`` of type ``UnschedulableOnNodePool`` with the
   core's reasons in words (written when they change, cleared once the gang is scheduled),
   an ``Unschedulable`` Event on the PodGroup and on its pending pods when the reasons change.

Bound pods are remembered ("assumed") until the cache shows them bound, so a cycle that runs
before the watch delivers the binding does not bind them again. Each cycle's figures (duration,
bound, evicted, API calls by kind) are kept in :attr:`Placement.last` for the status endpoint.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.conf import settings

from scheduler.core import (
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
    run_cycle,
)
from scheduler.core.collector import collector_paused
from scheduler.core.kai_names import (
    DEFAULT_TOPOLOGY_LEVELS,
    DEFAULT_TOPOLOGY_NAME,
    EXEC_TIMEOUT_ANNOTATION,
    GPU_RESOURCE,
    GROUP_NAME_ANNOTATION,
    PODGROUP_ANNOTATION,
    QUEUE_LABEL,
    SUBGROUP_LABEL,
    WORKFLOW_NAME_ANNOTATION,
)
from scheduler.core.readiness import InvalidGang, build_tree, is_ready, ready_counts
from scheduler.core.results import STALE, CycleResult
from scheduler.cycle_record import PendingGang, estimate_row
from scheduler.snapshot import scheduler_config
from scheduler.usage import queue_usage
from workflows.spec.units import parse_bytes, parse_millicores

from .client import REQUEST_TIMEOUT, Kube, call, describe, status_of
from .informer import Informer
from .moves import (
    MOVE_REASON,
    MOVED_FROM_ANNOTATION,
    PREEMPTION_REASON,
    is_moving,
    replacement_of,
)

logger = logging.getLogger(__name__)

PODGROUPS = ("scheduling.run.ai", "v2alpha2", "podgroups")
QUEUES = ("scheduling.run.ai", "v2", "queues")
TOPOLOGIES = ("kai.scheduler", "v1alpha1", "topologies")
STALE_REASON = "EvictionByScheduler"
INCOMPLETE_REASON = "GangIncomplete"
CONFLICT_REASON = "BindingConflict"  # another binder took the room a pod was bound into
UNSCHEDULABLE_CONDITION = "UnschedulableOnNodePool"
NODE_POOL = "default"
ASSUME_SECONDS = 30.0
MAX_POD_EVENTS = 8  # Unschedulable Events per gang and change (the PodGroup always gets one)
FINISHED = ("Succeeded", "Failed")
EVENT_REASONS = {PREEMPTION_REASON: "Preempted", MOVE_REASON: "Moved"}
USAGE_REFRESH_SECONDS = 30.0
REPLACEMENT_SEEN_SECONDS = 2.0  # how long a cycle waits for the cache to show replacements
# Taints that only mirror what the cache reads itself (the Ready condition, spec.unschedulable);
# the node lifecycle controller keeps them in step, and admission puts ``not-ready`` on every
# new Node until that controller has seen it Ready.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                    "node.kubernetes.io/unschedulable")


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=1 << 16)  # pods created or started in the same second share it
def _timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def _charge(totals: list[int], held) -> None:
    """Add what ``held`` (a core ``Pod`` or a pod's ``Requests``) takes to [gpus, cpu, memory]."""
    totals[0] += held.gpus
    totals[1] += held.cpu
    totals[2] += held.memory


def _quantity(parse, value) -> int:
    """`value` parsed, 0 when absent or not a quantity; the strings (the few request and
    allocatable amounts in use, as the API server returns them) parsed once."""
    return (_parsed if isinstance(value, str) else _parsed.__wrapped__)(parse, value)


@lru_cache(maxsize=1 << 12)
def _parsed(parse, value) -> int:
    try:
        return parse(value) if value is not None else 0
    except (ValueError, TypeError):
        return 0


def _whole(value) -> int:
    return int(str(value))


# --- the cache -----------------------------------------------------------------------------

class ClusterCache:
    """The five informers the placement reads; ``on_change`` wakes the cycle loop."""

    def __init__(self, kube_factory, *, namespace: str, watch_timeout: int = 300,
                 on_change=None):
        self.namespace = namespace
        self._kubes: list[Kube] = []

        def kube() -> Kube:
            made = kube_factory()
            self._kubes.append(made)
            return made

        options = {"watch_timeout": watch_timeout, "on_change": on_change}
        self.nodes = Informer("nodes", kube().core.list_node, **options)
        self.pods = Informer("pods", kube().core.list_pod_for_all_namespaces, **options)
        self.podgroups = Informer("podgroups", kube().custom.list_namespaced_custom_object,
                                  PODGROUPS[0], PODGROUPS[1], namespace, PODGROUPS[2],
                                  **options)
        self.queues = Informer("queues", kube().custom.list_cluster_custom_object, *QUEUES,
                               **options)
        self.topologies = Informer("topologies", kube().custom.list_cluster_custom_object,
                                   *TOPOLOGIES, **options)
        self.informers = [self.nodes, self.pods, self.podgroups, self.queues, self.topologies]
        self.threads: list[threading.Thread] = []

    def start(self, running, report=None) -> None:
        for informer in self.informers:
            thread = threading.Thread(
                target=informer.run, args=(running,), name=f"informer-{informer.name}",
                kwargs={"report": report}, daemon=True)
            thread.start()
            self.threads.append(thread)

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()
        for thread in self.threads:
            thread.join(timeout=10)
        for kube in self._kubes:
            kube.close()

    def relist(self) -> None:
        for informer in self.informers:
            informer.relist_requested = True


# --- cache → snapshot ----------------------------------------------------------------------

@dataclass
class Requests:
    gpus: int
    cpu: int
    memory: int


@dataclass(frozen=True)
class Replacement:
    """A consolidation move that was made: ``pod`` replaces ``moved``, to be bound to
    ``target``."""

    gang: str
    moved: str
    pod: str
    target: str
    requests: Requests


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
        return (_quantity(_whole, gpus),
                _quantity(parse_millicores, requests.get("cpu")),
                _quantity(parse_bytes, requests.get("memory")))

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


def wakes_scheduler(informer: str, event_type: str, obj: dict[str, Any] | None,
                    scheduler_name: str) -> bool:
    """Is this change worth a cycle? Everything but a bound pod's progress (bound, Running:
    the kubelet's status writes) — those change nothing the core decides on."""
    if informer != "pods" or obj is None or event_type == "DELETED":
        return True
    spec, metadata = obj.get("spec") or {}, obj.get("metadata") or {}
    if not spec.get("nodeName"):
        return spec.get("schedulerName") == scheduler_name  # pending: ours to place
    return bool(metadata.get("deletionTimestamp")) or \
        ((obj.get("status") or {}).get("phase") in FINISHED)


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
                 created_at=_timestamp(obj["metadata"].get("creationTimestamp")), usage=usage)


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


@dataclass
class SnapshotIndex:
    """The core's names back to the cluster's objects."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod name → pod
    podgroups: dict[str, dict[str, Any]] = field(default_factory=dict)  # gang → PodGroup
    gangs: dict[str, Gang] = field(default_factory=dict)
    gang_pods: dict[str, list[str]] = field(default_factory=dict)  # gang → every live pod
    terminating: dict[str, list[Requests]] = field(default_factory=dict)  # node → held
    node_free: dict[str, list[int]] = field(default_factory=dict)  # node → real free
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # gang → why not in the snapshot
    moving: list[dict[str, Any]] = field(default_factory=list)  # marked moved, not deleted
    orphans: list[dict[str, Any]] = field(default_factory=list)  # replacements of no move


def is_ours(pod: dict[str, Any], scheduler_name: str) -> bool:
    return (pod.get("spec") or {}).get("schedulerName") == scheduler_name


def _is_live(pod: dict[str, Any]) -> bool:
    return ((pod.get("status") or {}).get("phase") or "Pending") not in FINISHED


def _orphan(pod: dict[str, Any], cache: ClusterCache) -> bool:
    """A replacement whose pod was never marked moved (the scheduler stopped between the two
    writes): it must not run beside the pod it was made for."""
    metadata = pod["metadata"]
    moved_from = (metadata.get("annotations") or {}).get(MOVED_FROM_ANNOTATION)
    if not moved_from:
        return False
    original = cache.pods.get(f"{metadata.get('namespace')}/{moved_from}")
    return original is not None and not is_moving(original)


def build_snapshot(cache: ClusterCache, **options) -> tuple[Snapshot, SnapshotIndex]:
    with collector_paused():
        return _build_snapshot(cache, **options)


def _build_snapshot(cache: ClusterCache, *, scheduler_name: str, now: float,
                    assumed: dict[str, str] | None = None,
                   below_min: dict[str, float] | None = None,
                   config: SchedulerConfig | None = None,
                   memo: dict[str, tuple] | None = None,
                   usage: dict[str, float] | None = None) -> tuple[Snapshot, SnapshotIndex]:
    """``memo``: the previous cycles' gangs by name with what they were built from; a gang
    whose PodGroup and pods are unchanged (resourceVersions, bound nodes) is reused.
    ``usage``: historical usage per queue (time-based fair share; see ``scheduler.usage``).
    A gang's exec_timeout is its PodGroup's ``osmo/exec-timeout`` annotation (seconds)."""
    assumed = assumed or {}
    below_min = below_min or {}
    namespace = cache.namespace
    index = SnapshotIndex()
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
    for pod in cache.pods.items():
        if not _is_live(pod):
            continue
        metadata = pod["metadata"]
        key = f"{metadata.get('namespace')}/{metadata['name']}"
        node = (pod.get("spec") or {}).get("nodeName") or assumed.get(key)
        deleting = bool(metadata.get("deletionTimestamp"))
        group = (metadata.get("annotations") or {}).get(PODGROUP_ANNOTATION)
        mine = (metadata.get("namespace") == namespace and is_ours(pod, scheduler_name)
                and group in podgroups)
        if mine and not deleting and is_moving(pod):
            index.moving.append(pod)  # its delete failed after the mark: done again
            deleting = True
        if mine and not deleting and _orphan(pod, cache):
            index.orphans.append(pod)
            continue
        if mine and not deleting:
            members.setdefault(group, []).append((key, pod, node))
            continue
        if node and node in node_objects:
            requests = pod_requests(pod)
            _charge(terminating[node] if deleting and mine else foreign[node], requests)

    nodes = []
    for name, obj in sorted(node_objects.items()):
        allocatable = (obj.get("status") or {}).get("allocatable") or \
            (obj.get("status") or {}).get("capacity") or {}
        gpus = _quantity(_whole, allocatable.get(GPU_RESOURCE))
        cpu = _quantity(parse_millicores, allocatable.get("cpu"))
        memory = _quantity(parse_bytes, allocatable.get("memory"))
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
        spec = podgroup.get("spec") or {}
        gang_name = f"{namespace}/{name}"
        queue = spec.get("queue") or (podgroup["metadata"].get("labels") or {}).get(
            QUEUE_LABEL) or ""
        if queue not in queue_names or queue in parents:
            index.skipped[gang_name] = (
                f"Queue {queue!r} does not exist" if queue not in queue_names
                else f"Queue {queue!r} is not a leaf queue")
            index.podgroups[gang_name] = podgroup
            index.gang_pods[gang_name] = [key for key, _, _ in pods]
            for key, pod, _ in pods:
                index.pods[key] = pod
            continue
        signature = (podgroup["metadata"].get("resourceVersion"), queue,
                     below_min.get(gang_name),
                     tuple((key, pod["metadata"].get("resourceVersion"), node,
                            node in node_objects if node else True) for key, pod, node in pods))
        remembered = memo.get(gang_name) if memo is not None else None
        if remembered is not None and remembered[0] == signature:
            gang = remembered[1]
            for key, pod, _node in pods:
                index.pods[key] = pod
            if gang is not None:
                gangs.append(gang)
                index.gangs[gang_name] = gang
                index.gang_pods[gang_name] = [p.name for p in gang.pods]
            index.podgroups[gang_name] = podgroup
            seen.add(gang_name)
            continue
        subgroups = tuple(
            SubGroup(name=s["name"], parent=s.get("parent") or None,
                     min_member=_int_or_none(s.get("minMember")),
                     min_subgroup=_int_or_none(s.get("minSubGroup")),
                     topology=_constraint(s.get("topologyConstraint")))
            for s in spec.get("subGroups") or [])
        core_pods = []
        priority = None
        started: list[float] = []
        for key, pod, node in pods:
            requests = pod_requests(pod)
            pod_spec = pod.get("spec") or {}
            if priority is None and isinstance(pod_spec.get("priority"), int):
                priority = pod_spec["priority"]
            if node and node not in node_objects:
                continue  # bound to a node that is gone: it holds nothing anywhere
            if node:  # a pod starts after it was created, whatever its clock says
                started.append(max(_timestamp((pod.get("status") or {}).get("startTime")),
                                   _timestamp(pod["metadata"].get("creationTimestamp"))))
            subgroup = (pod["metadata"].get("labels") or {}).get(SUBGROUP_LABEL) \
                if subgroups else None
            index.pods[key] = pod
            core_pods.append(Pod(name=key, subgroup=subgroup, gpus=requests.gpus,
                                 cpu=requests.cpu, memory=requests.memory,
                                 node_selector=pod_spec.get("nodeSelector") or {},
                                 node=node or None))
        if not core_pods:
            if memo is not None:
                memo[gang_name] = (signature, None)
                seen.add(gang_name)
            continue
        priority = 50 if priority is None else priority
        preemptibility = spec.get("preemptibility")
        annotations = podgroup["metadata"].get("annotations") or {}
        workflow_name = annotations.get(WORKFLOW_NAME_ANNOTATION)
        gang = Gang(
            name=gang_name, queue=queue, priority=priority,
            preemptible=preemptibility == "preemptible" or (
                not preemptibility and priority < 100),
            semi_preemptible=preemptibility == "semi-preemptible",
            created_at=_timestamp(podgroup["metadata"].get("creationTimestamp")),
            min_member=_int_or_none(spec.get("minMember")),
            min_subgroup=_int_or_none(spec.get("minSubGroup")),
            subgroups=subgroups, topology=_constraint(spec.get("topologyConstraint")),
            pods=tuple(core_pods), running_since=min(started) if started else None,
            below_min_since=below_min.get(gang_name),
            exec_timeout=_seconds(annotations.get(EXEC_TIMEOUT_ANNOTATION)),
            workload=f"workflow {workflow_name!r}" if workflow_name else None)
        gangs.append(gang)
        index.gangs[gang_name] = gang
        index.podgroups[gang_name] = podgroup
        index.gang_pods[gang_name] = [p.name for p in core_pods]
        if memo is not None:
            memo[gang_name] = (signature, gang)
            seen.add(gang_name)
    if memo is not None:
        for gang_name in set(memo) - seen:
            del memo[gang_name]
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


# --- applying decisions --------------------------------------------------------------------

@dataclass
class CycleFigures:
    at: float = 0.0
    duration_ms: float = 0.0
    snapshot_ms: float = 0.0
    decide_ms: float = 0.0
    apply_ms: float = 0.0
    bound: int = 0
    evicted: int = 0
    moved: int = 0
    deferred: int = 0
    undone: int = 0
    pending: int = 0
    api_calls: Counter = field(default_factory=Counter)
    eviction_reasons: list[str] = field(default_factory=list)  # one per evicted pod

    def to_dict(self) -> dict[str, Any]:
        return {"duration_ms": round(self.duration_ms, 2),
                "snapshot_ms": round(self.snapshot_ms, 2), "decide_ms": round(self.decide_ms, 2),
                "apply_ms": round(self.apply_ms, 2), "bound": self.bound,
                "evicted": self.evicted, "moved": self.moved, "deferred": self.deferred,
                "undone": self.undone, "pending": self.pending,
                "api_calls": dict(sorted(self.api_calls.items()))}


class Placement:
    """One scheduler: the cache, the core, and the writes. ``cycle()`` runs one cycle."""

    def __init__(self, kube: Kube, cache: ClusterCache, *, scheduler_name: str | None = None,
                 config: SchedulerConfig | None = None, workers: int = 8):
        self.kube = kube
        self.cache = cache
        self.namespace = cache.namespace
        self.scheduler_name = scheduler_name or settings.OSMO_SCHEDULER_NAME
        self.config = config or scheduler_config()
        self._usage: tuple[float, dict[str, float]] = (-USAGE_REFRESH_SECONDS, {})
        self.assumed: dict[str, tuple[str, float]] = {}  # pod key → (node, when)
        self.below_min: dict[str, float] = {}
        self.memo: dict[str, tuple] = {}  # gang → (what it was built from, Gang)
        self.reported: dict[str, tuple] = {}  # gang → reasons last written
        self.last: CycleFigures | None = None
        self.last_result: CycleResult | None = None
        self.last_index: SnapshotIndex | None = None
        self.totals: Counter = Counter()  # api calls since start, by kind
        self.time_totals: Counter = Counter()  # ms since start: snapshot, decide, apply
        self.bound_total = 0
        self.cycles = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="osmo-bind")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    # --- the calls -----------------------------------------------------------------------
    @staticmethod
    def _retrying(call):
        """``call()``, once more when the connection failed before any answer (a pooled
        keep-alive connection the server had closed): every write here is safe to repeat — a
        repeated bind answers 409, a repeated delete 404, a repeated patch changes nothing."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001
            if status_of(exc) is not None:
                raise
            return call()

    def _count(self, figures: CycleFigures, kind: str) -> None:
        with self._lock:
            figures.api_calls[kind] += 1
            self.totals[kind] += 1

    def _bind(self, figures: CycleFigures, pod_key: str, node: str) -> str:
        """``ok``, ``bound`` (someone else bound it: 409), ``gone`` (404) or ``error``."""
        namespace, name = pod_key.split("/", 1)
        self._count(figures, "bind")
        try:
            self._retrying(lambda: call(
                self.kube, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
                {"apiVersion": "v1", "kind": "Binding",
                 "metadata": {"name": name, "namespace": namespace},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))
            return "ok"
        except Exception as exc:  # noqa: BLE001 - classified below
            status = status_of(exc)
            if status == 409:
                return "bound"
            if status == 404:
                return "gone"
            logger.warning("osmo scheduler: binding %s to %s failed: %s", pod_key, node,
                           describe(exc))
            return "error"

    def _event(self, figures: CycleFigures, obj: dict[str, Any], *, reason: str, message: str,
               kind: str = "Pod", api_version: str = "v1", type_: str = "Normal") -> None:
        metadata = obj["metadata"]
        namespace = metadata.get("namespace") or self.namespace
        self._count(figures, "event")
        stamp = _now_iso()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": api_version, "kind": kind,
                               "name": metadata["name"], "namespace": namespace,
                               "uid": metadata.get("uid")},
            "reason": reason, "message": message[:1024], "type": type_,
            "source": {"component": self.scheduler_name},
            "reportingComponent": self.scheduler_name, "reportingInstance": "osmo",
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:  # again once after a dropped keep-alive connection, as every other write here
            self._retrying(lambda: self.kube.core.create_namespaced_event(
                namespace, event, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT).release_conn())
        except Exception as exc:  # noqa: BLE001 - an Event is best effort
            logger.info("osmo scheduler: event on %s not recorded: %s", metadata["name"],
                        describe(exc))

    def _evict(self, figures: CycleFigures, pod: dict[str, Any], *, reason: str,
               message: str) -> bool:
        """A ``DisruptionTarget`` condition, a graceful delete, an Event; True when done."""
        if not self._mark(figures, pod, reason=reason, message=message):
            return False
        if not self._delete(figures, pod):
            return False
        self._event(figures, pod, reason=EVENT_REASONS.get(reason, reason), message=message,
                    type_="Warning")
        return True

    def _mark(self, figures: CycleFigures, pod: dict[str, Any], *, reason: str,
              message: str) -> bool:
        condition = {"type": "DisruptionTarget", "status": "True", "reason": reason,
                     "message": message, "lastTransitionTime": _now_iso()}
        return self._pod_write(figures, "pod_status", pod, lambda name, namespace:
                               self.kube.core.patch_namespaced_pod_status(
                                   name, namespace, {"status": {"conditions": [condition]}},
                                   _preload_content=False, _request_timeout=REQUEST_TIMEOUT))

    def _delete(self, figures: CycleFigures, pod: dict[str, Any]) -> bool:
        """A graceful delete; True when it was made (False: gone already, or failed)."""
        return self._pod_write(figures, "delete", pod, lambda name, namespace:
                               self.kube.core.delete_namespaced_pod(
                                   name, namespace, _preload_content=False,
                                   _request_timeout=REQUEST_TIMEOUT))

    def _create(self, figures: CycleFigures, pod: dict[str, Any]) -> bool:
        """False also when the name is taken (409: left from a move that was not made, and
        deleted first)."""
        return self._pod_write(figures, "create", pod, lambda _name, namespace:
                               self.kube.core.create_namespaced_pod(
                                   namespace, pod, _preload_content=False,
                                   _request_timeout=REQUEST_TIMEOUT))

    def _pod_write(self, figures: CycleFigures, kind: str, pod: dict[str, Any],
                   request) -> bool:
        """``request(name, namespace)`` about ``pod``, counted as ``kind``; True when it was
        made. A 404 (gone) or 409 (exists) is an answer, not worth a log line."""
        metadata = pod["metadata"]
        name, namespace = metadata["name"], metadata["namespace"]
        self._count(figures, kind)
        try:
            self._retrying(lambda: request(name, namespace)).release_conn()
        except Exception as exc:  # noqa: BLE001
            if status_of(exc) not in (404, 409):
                logger.warning("osmo scheduler: %s of %s/%s failed: %s", kind, namespace, name,
                               describe(exc))
            return False
        return True

    # --- the cycle -----------------------------------------------------------------------
    def usage(self, now: float) -> dict[str, float]:
        """Historical usage per queue, read again at most every ``USAGE_REFRESH_SECONDS``
        (the series gains a sample a minute)."""
        read_at, usage = self._usage
        if settings.OSMO_USAGE_HALF_LIFE and now - read_at >= USAGE_REFRESH_SECONDS:
            usage = queue_usage(now=datetime.now(UTC), namespace=self.namespace)
            self._usage = (now, usage)
        return usage

    def _assumed_nodes(self, now: float) -> dict[str, str]:
        for key, (_node, when) in list(self.assumed.items()):
            pod = self.cache.pods.get(key)
            if pod is None or (pod.get("spec") or {}).get("nodeName") or \
                    now - when > ASSUME_SECONDS:
                self.assumed.pop(key, None)
        return {key: node for key, (node, _when) in self.assumed.items()}

    def cycle(self) -> CycleFigures:
        started = time.monotonic()
        figures = CycleFigures(at=time.time())
        snapshot, index = build_snapshot(
            self.cache, scheduler_name=self.scheduler_name, now=figures.at,
            assumed=self._assumed_nodes(started), below_min=self.below_min,
            config=self.config, memo=self.memo, usage=self.usage(started))
        figures.snapshot_ms = (time.monotonic() - started) * 1000
        decide = time.monotonic()
        result = run_cycle(snapshot)
        figures.decide_ms = (time.monotonic() - decide) * 1000
        apply = time.monotonic()
        self.below_min = {stale.gang: stale.since for stale in result.stale
                          if not stale.evicted}
        self._apply_evictions(figures, result, index)
        replacements = self._apply_moves(figures, result, index)
        deferred = self._apply_bindings(figures, result, index, replacements)
        self._report(figures, result, index, deferred)
        self._await_cache(replacements)
        figures.apply_ms = (time.monotonic() - apply) * 1000
        figures.duration_ms = (time.monotonic() - started) * 1000
        self.last, self.last_result, self.last_index = figures, result, index
        self.cycles += 1
        self.bound_total += figures.bound
        self.time_totals.update({"snapshot": figures.snapshot_ms, "decide": figures.decide_ms,
                                 "apply": figures.apply_ms})
        return figures

    def _apply_evictions(self, figures: CycleFigures, result: CycleResult,
                         index: SnapshotIndex) -> None:
        for eviction in result.evictions:
            pod = index.pods.get(eviction.pod)
            if pod is None:
                continue
            if eviction.reason == STALE:
                reason = STALE_REASON
                message = (f"{self.scheduler_name}: gang {eviction.gang} stayed below its "
                           f"minimum longer than its grace period")
            else:
                reason = PREEMPTION_REASON
                message = (f"{self.scheduler_name}: {eviction.reason} by "
                           f"{eviction.by_gang or 'a waiting gang'}")
            if self._evict(figures, pod, reason=reason, message=message):
                figures.evicted += 1
                figures.eviction_reasons.append(eviction.reason)

    def _apply_moves(self, figures: CycleFigures, result: CycleResult,
                     index: SnapshotIndex) -> list[Replacement]:
        """Consolidation moves: each moved pod's replacement is created first (unbound, see
        :func:`replacement_of`), then the pod gets a ``DisruptionTarget`` condition (reason
        ``ConsolidationByScheduler``) and is deleted, so its task is never without a pod.
        A move whose create fails is not made; a replacement whose pod could not be marked is
        deleted again. Returns the replacements to bind to their targets."""
        for pod in index.moving + index.orphans:  # the rest of a move an earlier cycle began
            self._delete(figures, pod)
        replacements: list[Replacement] = []
        for move in result.moves:
            pod, current = index.pods.get(move.pod), self.cache.pods.get(move.pod)
            if pod is None or current is None or not _is_live(current) or \
                    current["metadata"].get("deletionTimestamp"):
                continue  # ended or going since the snapshot: nothing to move
            replacement = replacement_of(pod)
            namespace, name = pod["metadata"]["namespace"], replacement["metadata"]["name"]
            if not self._create(figures, replacement):
                continue
            message = (f"{self.scheduler_name}: moved from {move.source} to {move.target} "
                       f"(as {name}) to make room for gang {move.by_gang}")
            if not self._mark(figures, pod, reason=MOVE_REASON, message=message):
                self._delete(figures, replacement)  # the pod is gone or unchanged: no copy
                continue
            # Marked, the pod is leaving whatever happens: a failed delete is made again by
            # the next cycle (``SnapshotIndex.moving``).
            self._delete(figures, pod)
            self._event(figures, pod, reason=EVENT_REASONS[MOVE_REASON], message=message)
            figures.moved += 1
            replacements.append(Replacement(move.gang, move.pod, f"{namespace}/{name}",
                                            move.target, pod_requests(pod)))
        return replacements

    def _await_cache(self, replacements: list[Replacement]) -> None:
        """Wait (briefly) until the cache shows the moves just made: the replacement, and the
        moved pod marked. Until then the next cycle would not count what the replacement
        holds, or would take it for an orphan."""
        deadline = time.monotonic() + REPLACEMENT_SEEN_SECONDS
        while replacements and time.monotonic() < deadline:
            replacements = [r for r in replacements if self.cache.pods.get(r.pod) is None
                            or _orphan(self.cache.pods.get(r.pod), self.cache)]
            if replacements:
                time.sleep(0.02)

    def _precheck(self, placements: list[tuple[str, str]], waiting: set[str]) -> str | None:
        """Why the gang's bindings must wait, from the newest cache; None when they may go."""
        for pod_key, node in placements:
            pod = self.cache.pods.get(pod_key)
            if pod is None:
                return f"pod {pod_key} was deleted"
            if pod["metadata"].get("deletionTimestamp"):
                return f"pod {pod_key} is being deleted"
            if (pod.get("spec") or {}).get("nodeName"):
                continue  # bound meanwhile: the bind answers 409, then where it went is read
            node_obj = self.cache.nodes.get(node)
            if node_obj is None:
                return f"node {node} is gone"
            if not node_schedulable(node_obj):
                return f"node {node} is no longer schedulable"
            if node in waiting:
                return f"waiting for evicted pods on node {node} to terminate"
        return None

    @staticmethod
    def _overcommitted(index: SnapshotIndex, nodes: set[str],
                       arriving: list[tuple[str, Any]]) -> set[str]:
        """Those of ``nodes`` where what is bound there — the snapshot's pods, terminating ones
        included (the core counts a victim's or a moved pod's room free at once; the node frees
        it when the pod is gone) — plus ``arriving`` (node, requests) needs more than the node
        has."""
        used = {node: list(index.terminating.get(node) or (0, 0, 0))
                for node in nodes if node in index.node_free}
        if not used:
            return set()
        for gang in index.gangs.values():
            for pod in gang.pods:
                if pod.node in used:
                    _charge(used[pod.node], pod)
        for node, held in arriving:
            if node in used:
                _charge(used[node], held)
        return {node for node, usage in used.items()
                if any(usage[i] > index.node_free[node][i] for i in range(3))}

    @staticmethod
    def _requests(index: SnapshotIndex, replacements: list[Replacement]) -> dict[str, Any]:
        """Pod key → what it asks for, for every pod this cycle may bind."""
        held: dict[str, Any] = {pod.name: pod for gang in index.gangs.values()
                                for pod in gang.pods}
        held.update({replacement.pod: replacement.requests for replacement in replacements})
        return held

    def _waiting_on(self, result: CycleResult, index: SnapshotIndex,
                    replacements: list[Replacement]) -> set[str]:
        """Nodes where this cycle's bindings need room that is not free yet: what terminating
        pods still hold, or what a move that was not made still holds."""
        gang_pods = self._requests(index, [])
        leaving = {eviction.pod for eviction in result.evictions}
        leaving |= {replacement.moved for replacement in replacements}
        nodes = {node for node, values in index.terminating.items() if any(values)}
        nodes |= {gang_pods[name].node for name in leaving if name in gang_pods}
        nodes |= {move.source for move in result.moves}
        nodes |= {replacement.target for replacement in replacements}
        held = self._requests(index, replacements)
        arriving = [(binding.node, held[binding.pod]) for binding in result.bindings
                    if binding.pod in held]
        arriving += [(r.target, r.requests) for r in replacements]
        return self._overcommitted(index, nodes, arriving)

    def _apply_bindings(self, figures: CycleFigures, result: CycleResult,
                        index: SnapshotIndex, replacements: list[Replacement]
                        ) -> dict[str, str]:
        by_gang: dict[str, list[tuple[str, str]]] = {}
        for binding in result.bindings:
            by_gang.setdefault(binding.gang, []).append((binding.pod, binding.node))
        deferred: dict[str, str] = {}
        checked: dict[str, list[tuple[str, str]]] = {}
        waiting = self._waiting_on(result, index, replacements) \
            if by_gang or replacements else set()
        for gang, placements in by_gang.items():
            why = self._precheck(placements, waiting)
            if why is not None:
                deferred[gang] = why
                figures.deferred += 1
                continue
            checked[gang] = placements
        jobs = [(gang, pod, node) for gang, placements in checked.items()
                for pod, node in placements]
        # A replacement whose target still waits for a terminating pod stays pending: a later
        # cycle places it like any pending pod of its gang.
        moved = [(None, r.pod, r.target) for r in replacements if r.target not in waiting]
        outcomes = list(self._pool.map(lambda job: self._bind(figures, job[1], job[2]),
                                       jobs + moved))
        now = time.monotonic()
        results: dict[str, dict[str, str]] = {}
        placed: dict[str, tuple[str | None, str]] = {}  # pod → (gang, node) bound by us now
        landed: dict[str, str] = {}  # pod → the node another binder bound it to, not ours
        for (gang, pod, node), outcome in zip(jobs + moved, outcomes, strict=True):
            if outcome == "bound":
                outcome, elsewhere = self._bound_where(figures, pod, node)
                if elsewhere:
                    landed[pod] = elsewhere
                    self.assumed[pod] = (elsewhere, now)
            if outcome == "ok":
                self.assumed[pod] = (node, now)
                placed[pod] = (gang, node)
                figures.bound += 1
            if gang is not None:
                results.setdefault(gang, {})[pod] = outcome
        conflicts = self._release_conflicts(figures, index, replacements, placed, landed,
                                            results) if landed else {}
        for gang, outcome in results.items():
            if all(value in ("ok", "bound") for value in outcome.values()):
                continue
            why = self._incomplete(figures, gang, outcome, index, conflicts)
            if why:
                deferred[gang] = why
        return deferred

    def _bound_where(self, figures: CycleFigures, pod_key: str, planned: str
                     ) -> tuple[str, str | None]:
        """After a 409: where the pod is bound. ``("bound", None)`` on the planned node,
        ``("bound", node)`` on another one, ``("gone", None)`` when it was deleted,
        ``("error", None)`` when it cannot be read."""
        namespace, name = pod_key.split("/", 1)
        self._count(figures, "get")
        try:
            pod = self._retrying(lambda: call(
                self.kube, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}"))
        except Exception as exc:  # noqa: BLE001 - classified below
            if status_of(exc) == 404:
                return "gone", None
            logger.warning("osmo scheduler: %s answered 409 and cannot be read: %s", pod_key,
                           describe(exc))
            return "error", None
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return "gone", None
        return "bound", (node if node != planned else None)

    def _release_conflicts(self, figures: CycleFigures, index: SnapshotIndex,
                           replacements: list[Replacement],
                           placed: dict[str, tuple[str | None, str]], landed: dict[str, str],
                           results: dict[str, dict[str, str]]) -> dict[str, str]:
        """Pods another binder bound to other nodes than planned: where such a node now lacks
        room for what this cycle bound there, pods this cycle bound there are released
        (deleted: they never ran) until it has room — those of the intruder's gang first — so
        no node holds more than it has; their gangs are then completed or undone as any gang
        whose binds failed. Returns each released pod's explanation."""
        held = self._requests(index, replacements)
        arriving = {pod: (node, held[pod]) for pod, (_gang, node) in placed.items()
                    if pod in held}
        intruding = [(node, held[pod]) for pod, node in landed.items() if pod in held]
        gang_by_pod = {pod: gang for gang, outcome in results.items() for pod in outcome}
        conflicts: dict[str, str] = {}
        for node in sorted(set(landed.values())):
            intruders = sorted(pod for pod, n in landed.items() if n == node)
            gangs = {gang_by_pod.get(pod) for pod in intruders}
            candidates = sorted((pod for pod, (n, _held) in arriving.items() if n == node),
                                key=lambda pod: (placed[pod][0] not in gangs, pod))
            while candidates and self._overcommitted(
                    index, {node}, [*arriving.values(), *intruding]):
                pod_key = candidates.pop(0)
                del arriving[pod_key]
                why = (f"{', '.join(intruders)} was bound to {node} by another binder, which "
                       f"left no room there for {pod_key}")
                pod = self.cache.pods.get(pod_key) or index.pods.get(pod_key)
                if pod is not None:
                    self._evict(figures, pod, reason=CONFLICT_REASON,
                                message=f"{self.scheduler_name}: {why}")
                self.assumed.pop(pod_key, None)
                figures.undone += 1
                conflicts[pod_key] = why
                gang = placed[pod_key][0]
                if gang is not None:
                    results[gang][pod_key] = "released"
        return conflicts

    def _incomplete(self, figures: CycleFigures, gang_name: str, outcome: dict[str, str],
                    index: SnapshotIndex, conflicts: dict[str, str]) -> str:
        """Some binds of a gang failed or were released: complete later if it can still reach
        its minimum, else undo what this cycle bound. Returns the explanation."""
        gang = index.gangs[gang_name]
        failed = sorted(pod for pod, value in outcome.items() if value not in ("ok", "bound"))
        bound = {pod.name for pod in gang.pods if pod.node} | {
            pod for pod, value in outcome.items() if value in ("ok", "bound")}
        if gang_ready(gang, bound):
            return ""
        causes = "; ".join(
            conflicts.get(pod) or (f"{pod} was deleted before binding"
                                   if outcome[pod] == "gone" else f"binding {pod} failed")
            for pod in failed)
        alive = {pod.name for pod in gang.pods if outcome.get(pod.name) not in ("gone",
                                                                               "released")}
        if gang_ready(gang, alive):
            return f"{causes}; the gang is completed in the next cycle"
        for pod_key, value in outcome.items():
            if value != "ok":
                continue
            pod = self.cache.pods.get(pod_key) or index.pods.get(pod_key)
            if pod is not None and self._evict(
                    figures, pod, reason=INCOMPLETE_REASON,
                    message=f"{self.scheduler_name}: gang {gang_name} cannot reach its "
                            f"minimum: {causes}"):
                figures.undone += 1
            self.assumed.pop(pod_key, None)
        return (f"{causes}; the gang cannot reach its minimum, so the pods bound with them "
                f"were released")

    # --- status, events ------------------------------------------------------------------
    def _report(self, figures: CycleFigures, result: CycleResult, index: SnapshotIndex,
                deferred: dict[str, str]) -> None:
        reasons: dict[str, list[dict[str, str]]] = {}
        for explanation in result.explanations:
            reasons[explanation.gang] = [{"reason": r.code, "message": r.message}
                                         for r in explanation.reasons]
        for gang, why in {**index.skipped, **deferred}.items():
            reasons[gang] = [{"reason": "bind_deferred" if gang in deferred
                              else "invalid_queue", "message": why}]
        figures.pending = len(reasons)
        bound_now = {binding.gang for binding in result.bindings} - set(deferred)
        for gang, podgroup in index.podgroups.items():
            words = reasons.get(gang)
            if words is not None:
                signature = tuple((r["reason"], r["message"]) for r in words)
                if self.reported.get(gang) == signature:
                    continue
                self.reported[gang] = signature
                self._write_unschedulable(figures, gang, podgroup, words, index)
            elif gang in bound_now or self._has_condition(podgroup):
                if self.reported.pop(gang, None) is not None or self._has_condition(podgroup):
                    self._clear_unschedulable(figures, podgroup)
        for gang in list(self.reported):
            if gang not in index.podgroups:
                self.reported.pop(gang, None)

    @staticmethod
    def _has_condition(podgroup: dict[str, Any]) -> bool:
        return any(c.get("type") == UNSCHEDULABLE_CONDITION
                   for c in (podgroup.get("status") or {}).get("schedulingConditions") or [])

    def _podgroup_status(self, figures: CycleFigures, podgroup: dict[str, Any],
                         conditions: list[dict[str, Any]]) -> None:
        self._count(figures, "podgroup_status")
        try:
            self._retrying(lambda: self.kube.custom.patch_namespaced_custom_object_status(
                PODGROUPS[0], PODGROUPS[1], podgroup["metadata"]["namespace"], PODGROUPS[2],
                podgroup["metadata"]["name"], {"status": {"schedulingConditions": conditions}},
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT)).release_conn()
        except Exception as exc:  # noqa: BLE001 - written again when the reasons change
            logger.info("osmo scheduler: PodGroup %s status not written: %s",
                        podgroup["metadata"]["name"], describe(exc))

    def _write_unschedulable(self, figures: CycleFigures, gang: str, podgroup: dict[str, Any],
                             words: list[dict[str, str]], index: SnapshotIndex) -> None:
        message = "; ".join(r["message"] for r in words)
        previous = [c for c in (podgroup.get("status") or {}).get("schedulingConditions") or []
                    if c.get("type") == UNSCHEDULABLE_CONDITION]
        try:
            transition = int(previous[-1].get("transitionID") or 0) + 1 if previous else 0
        except ValueError:
            transition = 0
        self._podgroup_status(figures, podgroup, [{
            "type": UNSCHEDULABLE_CONDITION, "nodePool": NODE_POOL, "reason": "Unschedulable",
            "message": message, "status": "True", "transitionID": str(transition),
            "lastTransitionTime": _now_iso(), "reasons": words}])
        self._event(figures, podgroup, reason="Unschedulable", message=message,
                    kind="PodGroup", api_version="scheduling.run.ai/v2alpha2",
                    type_="Warning")
        pending = [index.pods[key] for key in index.gang_pods.get(gang, ())
                   if key in index.pods and not (index.pods[key].get("spec") or {}).get(
                       "nodeName")]
        for pod in pending[:MAX_POD_EVENTS]:
            self._event(figures, pod, reason="FailedScheduling", message=message,
                        type_="Warning")

    def _clear_unschedulable(self, figures: CycleFigures, podgroup: dict[str, Any]) -> None:
        if not self._has_condition(podgroup):
            return
        self._podgroup_status(figures, podgroup, [])


def pending_gangs(placement: Placement) -> tuple[PendingGang, ...]:
    """The last cycle's pending gangs for the cycle record (``explain``,
    ``GET /api/scheduler/status``): the PodGroup's name, its workflow and group when it is
    ours (``osmo/*`` annotations), and the reasons in words."""
    result, index = placement.last_result, placement.last_index
    if result is None or index is None:
        return ()
    rows = []
    reasons = {e.gang: (e.queue, [r.to_dict() for r in e.reasons]) for e in result.explanations}
    for gang, why in index.skipped.items():
        reasons[gang] = ("", [{"code": "invalid_queue", "message": why}])
    for gang, signature in placement.reported.items():
        if gang not in reasons and signature and signature[0][0] == "bind_deferred":
            reasons[gang] = (index.gangs[gang].queue if gang in index.gangs else "",
                             [{"code": "bind_deferred", "message": signature[0][1]}])
    for gang, (queue, words) in sorted(reasons.items()):
        podgroup = index.podgroups.get(gang)
        annotations = ((podgroup or {}).get("metadata") or {}).get("annotations") or {}
        rows.append(PendingGang(podgroup=gang.split("/", 1)[-1],
                                workflow=annotations.get(WORKFLOW_NAME_ANNOTATION, ""),
                                group=annotations.get(GROUP_NAME_ANNOTATION, ""), queue=queue,
                                reasons=words, estimate=estimate_row(result.estimate(gang))))
    return tuple(rows)

