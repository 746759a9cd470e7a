"""Per-gang state of one cycle: its tree, tentative placement, what was decided for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.core.model import Gang, Pod
from scheduler.core.placement import GangWork
from scheduler.core.readiness import GangTree, core_counts
from scheduler.core.results import Reason


def amount_of(pods: Iterable[Pod]) -> list[int]:
    total = [0, 0, 0]
    for pod in pods:
        total[0] += pod.gpus
        total[1] += pod.cpu
        total[2] += pod.memory
    return total


@dataclass
class GangRun:
    """A gang during the cycle. `work` is None for gangs whose tree is invalid."""

    gang: Gang
    tree: GangTree | None
    work: GangWork | None
    queue_ok: bool
    reasons: list[Reason] = field(default_factory=list)
    evicted: bool = False
    new_pods: list[tuple[Pod, int]] = field(default_factory=list)
    evicted_pods: set[str] = field(default_factory=set)
    moved: set[str] = field(default_factory=set)
    given_up: Reason | None = None  # placed this cycle, then taken back by a reclaim

    @property
    def order_key(self) -> tuple:
        """Within a queue: higher priority first, then FIFO, then name."""
        return (-self.gang.priority, self.gang.created_at, self.gang.name)

    def non_preemptible_share(self, amount: list[int], core: bool) -> list[int]:
        """What part of new pods counts as non-preemptible (`core`: minimum-phase pods)."""
        if self.gang.preemptible:
            return [0, 0, 0]
        if self.gang.semi_preemptible and not core:
            return [0, 0, 0]
        return amount

    def bound_split(self) -> tuple[list[Pod], list[Pod]]:
        """Bound pods (from the snapshot) as (core, surplus); surplus in eviction order."""
        core: list[Pod] = []
        surplus: list[Pod] = []
        if self.tree is None:
            bound = [pod for pod in self.gang.pods if pod.node is not None]
            return bound, []
        evicted = self.evicted_pods
        bound_by_node = [[pod for pod in node.pods
                          if pod.node is not None and pod.name not in evicted]
                         for node in self.tree.nodes]
        keep = core_counts(self.tree, [len(bound) for bound in bound_by_node])
        for leaf in self.tree.leaves:
            bound = bound_by_node[leaf]
            core.extend(bound[:keep[leaf]])
            surplus.extend(reversed(bound[keep[leaf]:]))
        return core, surplus
