"""The snapshot the scheduler reads: frozen dataclasses, and the few values derived from one
that each object works out once (`Gang.settled_amount`, `Node.release_sums`): a caller keeping
its objects from cycle to cycle saves the core that work every cycle.

The Django layer builds one `Snapshot` per cycle (nodes, queues, gangs, topology, `now`, config)
and hands it to `scheduler.core.cycle.run_cycle`. Nothing here knows about a database or a clock:
time is `Snapshot.now` (seconds, any epoch, as long as every timestamp uses the same one).

Units: GPUs are whole devices, CPU is millicores, memory is bytes. Every request and capacity is
an `int`, so the arithmetic is exact and results are reproducible.

Mappings in the input (node labels, pod node selectors) are frozen into sorted tuples of
`(key, value)` pairs so that snapshots hash, compare and iterate deterministically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from operator import itemgetter

RESOURCES = ("gpu", "cpu", "memory")
UNLIMITED = -1

PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"
SEMI_PREEMPTIBLE = "semi-preemptible"

BINPACK = "binpack"
SPREAD = "spread"


_DEADLINE, _GPUS, _CPU, _MEMORY = (itemgetter(i) for i in range(4))


def cumulative_releases(entries: Sequence[tuple]) -> tuple[list, list, list, list]:
    """`(deadline, gpus, cpu, memory, ...)` entries in deadline order → their deadlines, and
    what has come back by each (gpus, cpu, memory)."""
    return (list(map(_DEADLINE, entries)), list(accumulate(map(_GPUS, entries))),
            list(accumulate(map(_CPU, entries))), list(accumulate(map(_MEMORY, entries))))


def freeze_pairs(value: Mapping[str, str] | tuple | list | None) -> tuple[tuple[str, str], ...]:
    """A mapping or an iterable of pairs as a sorted tuple of `(key, value)` pairs."""
    if not value:  # None or empty: most pods select no labels
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(key), str(val)) for key, val in items))


@dataclass(frozen=True)
class Node:
    """A schedulable machine. `labels` carry the topology levels (e.g. rack, zone).

    For a caller that keeps them from cycle to cycle (None: the core works them out from the
    gangs; either every node of a snapshot carries one or the core works it out for all):
    - `bound`: what the snapshot's gangs' pods bound to this node request in all (gpus, cpu,
      memory); the core then charges no bound pod one by one (but an evicted one back);
    - `releases`: `(deadline, gpus, cpu, memory, gang name)` of each of those pods, sorted:
      the deadline is its gang's `Gang.deadline`, INF (`float("inf")`) without one. The
      reservations' timeline starts from them (`timelines.Timeline`).
    """

    name: str
    gpus: int
    cpu: int = 0
    memory: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    schedulable: bool = True
    bound: tuple[int, int, int] | None = None
    releases: tuple[tuple[float, int, int, int, str], ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", freeze_pairs(self.labels))

    def label(self, key: str) -> str | None:
        for label_key, label_value in self.labels:
            if label_key == key:
                return label_value
        return None

    @cached_property
    def release_sums(self) -> tuple[list, list, list, list]:
        """`cumulative_releases` of `releases`, worked out once per object (a caller keeping
        a node from cycle to cycle hands the same object to every cycle)."""
        return cumulative_releases(self.releases or ())


@dataclass(frozen=True)
class ResourceQuota:
    """KAI Queue v2 per-resource settings. `quota`/`limit` -1 mean unlimited / no limit."""

    quota: int = UNLIMITED
    limit: int = UNLIMITED
    over_quota_weight: int = 1


@dataclass(frozen=True)
class Queue:
    """A KAI queue. Only leaf queues hold gangs; `parent=None` marks a top-level queue.

    `created_at` orders otherwise equal queues (older first), then the name does.
    `usage`: the queue's own historical GPU usage, decayed and normalized to the cluster's
    capacity (0..1, KAI's time-based fair share; 0 when it is off). A parent's usage is its
    own plus its children's (the core sums the tree).
    """

    name: str
    parent: str | None = None
    priority: int = 100
    gpu: ResourceQuota = ResourceQuota()
    cpu: ResourceQuota = ResourceQuota()
    memory: ResourceQuota = ResourceQuota()
    created_at: float = 0.0
    usage: float = 0.0

    def resource(self, resource: str) -> ResourceQuota:
        return getattr(self, resource)


@dataclass(frozen=True)
class TopologyLevel:
    """One level of a KAI Topology: the node label that names its domains, and an alias."""

    node_label: str
    alias: str | None = None


@dataclass(frozen=True)
class Topology:
    """Levels ordered coarsest (e.g. zone) to finest (e.g. hostname), as in KAI v1alpha1."""

    name: str = "osmo-topology"
    levels: tuple[TopologyLevel, ...] = ()

    def level_index(self, level: str | None) -> int | None:
        """Index of a level named by node label or alias; None when unset or unknown."""
        if not level:
            return None
        for index, topology_level in enumerate(self.levels):
            if level in (topology_level.node_label, topology_level.alias):
                return index
        return None

    def level_name(self, index: int) -> str:
        level = self.levels[index]
        return level.alias or level.node_label


@dataclass(frozen=True)
class TopologyConstraint:
    """KAI `topologyConstraint`: levels by node label or alias of the snapshot's topology."""

    required_level: str | None = None
    preferred_level: str | None = None


@dataclass(frozen=True)
class SubGroup:
    """One PodGroup v2alpha2 subgroup. Leaves use `min_member`, mid-levels `min_subgroup`."""

    name: str
    parent: str | None = None
    min_member: int | None = None
    min_subgroup: int | None = None
    topology: TopologyConstraint | None = None


@dataclass(frozen=True)
class Pod:
    """A pod of a gang. `node` is the node it is bound to (running), None while pending.

    `subgroup` names a leaf subgroup; None for gangs without subgroups.
    """

    name: str
    subgroup: str | None = None
    gpus: int = 0
    cpu: int = 0
    memory: int = 0
    node_selector: tuple[tuple[str, str], ...] = ()
    node: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_selector", freeze_pairs(self.node_selector))


@dataclass(frozen=True)
class Gang:
    """One PodGroup: the unit of gang scheduling.

    - `priority` is the PriorityClass value (osmo-high 125, osmo-normal 100, osmo-low 50).
    - `preemptible`: may this gang be evicted by preempt/reclaim? `semi_preemptible=True` (with
      `preemptible=False`) makes only the required core non-preemptible and the elastic surplus
      preemptible (seed 003).
    - `min_member` / `min_subgroup`: the root's gang rule (see `readiness`).
    - `created_at`: creation timestamp, FIFO order within a priority (then `name`).
    - `running_since`: when the gang last became ready (None if never); newest-started victims
      are evicted first because they lose the least work.
    - `below_min_since`: since when a running gang has been below its required members (the
      Django layer keeps it from `CycleResult.stale`); None when not known to be stale.
    - `staleness_grace_seconds`: per-gang override of the stale grace period; negative disables.
    - `exec_timeout`: seconds the gang may run (OSMO's per-group `exec_timeout`), None for none:
      a running gang ends by `running_since + exec_timeout` at the latest, a pending one placed
      now by `now + exec_timeout`. Reservations and start estimates are built on it.
    - `queued_since`: since when the gang waits to be placed (None: `created_at`); a gang
      waiting `SchedulerConfig.reserve_after_seconds` gets a reservation.
    - `workload`: what the gang belongs to, as users name it (e.g. `workflow 'train-3'`), for
      explanations; None names the gang.
    """

    name: str
    queue: str
    priority: int = 100
    preemptible: bool = False
    semi_preemptible: bool = False
    created_at: float = 0.0
    min_member: int | None = None
    min_subgroup: int | None = None
    subgroups: tuple[SubGroup, ...] = ()
    topology: TopologyConstraint | None = None
    pods: tuple[Pod, ...] = ()
    running_since: float | None = None
    below_min_since: float | None = None
    staleness_grace_seconds: float | None = None
    exec_timeout: float | None = None
    queued_since: float | None = None
    workload: str | None = None

    @property
    def deadline(self) -> float | None:
        """When a running gang ends at the latest (its exec_timeout), None if unbounded."""
        if self.exec_timeout is None or self.running_since is None:
            return None
        return self.running_since + self.exec_timeout

    @property
    def preemptibility(self) -> str:
        if self.preemptible:
            return PREEMPTIBLE
        return SEMI_PREEMPTIBLE if self.semi_preemptible else NON_PREEMPTIBLE

    @cached_property
    def settled_amount(self) -> tuple[int, int, int] | None:
        """What its pods request in all when every pod is bound and none names a subgroup,
        else None. Worked out once per object: a caller keeping a gang from cycle to cycle
        hands the same object to every cycle."""
        gpus = cpu = memory = 0
        for pod in self.pods:
            if pod.node is None or pod.subgroup is not None:
                return None
            gpus += pod.gpus
            cpu += pod.cpu
            memory += pod.memory
        return gpus, cpu, memory


@dataclass(frozen=True)
class SchedulerConfig:
    """Knobs of one cycle.

    - `placement`: `binpack` (fill the fullest node that fits; default, keeps whole nodes free for
      large pods) or `spread` (emptiest node first).
    - `stale_grace_seconds`: how long a running gang may stay below its minimum (KAI: 60 s).
    - `max_domain_attempts`: how many topology domains one (sub)group tries before giving up;
      bounds backtracking on large clusters. Domains whose aggregate free capacity cannot hold
      the group are skipped without counting.
    - `consolidate` / `reclaim` / `preempt`: enable the actions that move or evict running
      pods.
    - `reserve_after_seconds`: a gang first in its queue that has waited this long and still
      does not fit gets a reservation (EASY backfill, see `reservation`); negative: never.
    - `max_reservations`: reservations one cycle keeps (at most one per leaf queue).
    - `usage_k_value`: how strongly historical usage lowers a queue's over-quota share
      (KAI's `kValue`; only matters when queues carry `usage`).
    """

    placement: str = BINPACK
    stale_grace_seconds: float = 60.0
    max_domain_attempts: int = 16
    consolidate: bool = True
    reclaim: bool = True
    preempt: bool = True
    reserve_after_seconds: float = 10.0
    max_reservations: int = 4
    usage_k_value: float = 1.0


@dataclass(frozen=True)
class Snapshot:
    """Everything one cycle needs. Input order does not matter: the core sorts by name.

    Names must be unique per kind across the snapshot (nodes, queues, gangs, pods): use
    `namespace/name` for gangs and pods.
    """

    nodes: tuple[Node, ...] = ()
    queues: tuple[Queue, ...] = ()
    gangs: tuple[Gang, ...] = ()
    topology: Topology = Topology()
    now: float = 0.0
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
