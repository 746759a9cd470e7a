"""What one cycle decides, as plain frozen dataclasses with `to_dict()` for JSON.

The Django layer applies, in this order: `evictions` (free their nodes: a whole gang's tasks end
FAILED_PREEMPTED / stale, evicted elastic surplus is pending again), then `moves` (a running
pod leaves one node for another: on Kubernetes, evict it and recreate it bound to the target
node; the task keeps running and is not failed), then `bindings` (pod -> node; some depend on
the evictions and moves of the same cycle), then stores `explanations`, `queues` and `stale`
for `GET /api/scheduler/status`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

PREEMPTED = "preempted"
RECLAIMED = "reclaimed"
STALE = "stale"
CONSOLIDATED = "consolidated"


@dataclass(frozen=True)
class Reason:
    """Why a gang is still pending, in words a user understands.

    `code` is stable for programs (e.g. `queue_over_quota`, `insufficient_gpus`,
    `topology_no_domain`); `message` names the queue/level and the numbers.
    """

    code: str
    message: str
    queue: str | None = None
    level: str | None = None
    domain: str | None = None

    def to_dict(self) -> dict:
        return {key: value for key, value in vars(self).items() if value is not None}


@dataclass(frozen=True)
class Binding:
    pod: str
    gang: str
    node: str


@dataclass(frozen=True)
class Eviction:
    """A pod to evict; `reason` is `preempted`, `reclaimed` or `stale`; `by_gang` the winner."""

    pod: str
    gang: str
    node: str | None
    reason: str
    by_gang: str | None = None


@dataclass(frozen=True)
class Move:
    """Consolidation: a running pod of a preemptible gang moves from `source` to `target` in
    this cycle so that `by_gang` fits; `reason` is `consolidated`."""

    pod: str
    gang: str
    source: str
    target: str
    by_gang: str
    reason: str = CONSOLIDATED


@dataclass(frozen=True)
class GangExplanation:
    gang: str
    queue: str
    reasons: tuple[Reason, ...]

    def to_dict(self) -> dict:
        return {"gang": self.gang, "queue": self.queue,
                "reasons": [reason.to_dict() for reason in self.reasons]}


@dataclass(frozen=True)
class ResourceFigures:
    """One resource of one queue after the cycle. -1 in `deserved`/`limit` means unlimited.

    `deserved` is the configured quota; `requested` counts running and pending pods of the
    queue's subtree; `allocated*` include this cycle's bindings and evictions.
    """

    resource: str
    deserved: int
    limit: int
    fair_share: int
    allocated: int
    allocated_non_preemptible: int
    requested: int
    reserved: int = 0


@dataclass(frozen=True)
class QueueStatus:
    name: str
    parent: str | None
    priority: int
    resources: tuple[ResourceFigures, ...]

    def figures(self, resource: str) -> ResourceFigures:
        return next(figures for figures in self.resources if figures.resource == resource)

    def to_dict(self) -> dict:
        return {"name": self.name, "parent": self.parent, "priority": self.priority,
                "resources": {figures.resource: {key: value for key, value in
                                                 asdict(figures).items() if key != "resource"}
                              for figures in self.resources}}


@dataclass(frozen=True)
class StartEstimate:
    """A waiting gang's reservation: the nodes it will get and when it is expected to start.

    `at` is the time by which the work in the way reaches its exec_timeout (an upper bound:
    work usually ends sooner), None when work without an exec_timeout is in the way
    (`untimed` names it). `waits_for` names the work whose deadline `at` is.
    """

    gang: str
    queue: str
    at: float | None
    nodes: tuple[str, ...]
    waits_for: tuple[str, ...] = ()
    untimed: tuple[str, ...] = ()
    gpus: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StaleGang:
    """A running gang below its minimum: `since` to persist as `Gang.below_min_since`."""

    gang: str
    since: float
    evict_at: float | None
    evicted: bool


@dataclass(frozen=True)
class CycleResult:
    now: float
    bindings: tuple[Binding, ...]
    evictions: tuple[Eviction, ...]
    explanations: tuple[GangExplanation, ...]
    queues: tuple[QueueStatus, ...]
    stale: tuple[StaleGang, ...]
    moves: tuple[Move, ...] = ()
    estimates: tuple[StartEstimate, ...] = ()

    def estimate(self, gang: str) -> StartEstimate | None:
        return next((estimate for estimate in self.estimates if estimate.gang == gang), None)

    def explanation(self, gang: str) -> tuple[Reason, ...]:
        for explanation in self.explanations:
            if explanation.gang == gang:
                return explanation.reasons
        return ()

    def queue(self, name: str) -> QueueStatus:
        return next(status for status in self.queues if status.name == name)

    def to_dict(self) -> dict:
        return {
            "now": self.now,
            "bindings": [asdict(binding) for binding in self.bindings],
            "evictions": [asdict(eviction) for eviction in self.evictions],
            "explanations": [explanation.to_dict() for explanation in self.explanations],
            "queues": [status.to_dict() for status in self.queues],
            "stale": [asdict(stale) for stale in self.stale],
            "moves": [asdict(move) for move in self.moves],
            "estimates": [estimate.to_dict() for estimate in self.estimates],
        }
