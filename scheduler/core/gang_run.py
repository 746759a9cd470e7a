"""Per-gang state of one cycle: its tree, tentative placement, what was decided for it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

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


class GangRun:
    """A gang during the cycle. `work` and `tree` are None for gangs whose tree is invalid.

    A *settled* gang (`GangRun.settled`: every pod bound, no subgroups) has nothing to place,
    and most cycles ask it nothing but whether it is ready; its tree and placement state are
    built the first time something reads them (`build`), exactly as they would have been
    built up front - the cluster's node index they read does not change during a cycle."""

    __slots__ = ("gang", "_tree", "_work", "_build", "_ready", "valid", "bad_levels",
                 "queue_ok", "reasons", "evicted", "new_pods", "evicted_pods", "moved",
                 "given_up")

    def __init__(self, gang: Gang, tree: GangTree | None, work: GangWork | None,
                 queue_ok: bool) -> None:
        self.gang = gang
        self._tree = tree
        self._work = work
        self._build: Callable[[Gang], tuple[GangTree, GangWork]] | None = None
        self._ready = False
        self.valid = work is not None
        self.bad_levels: list[str] = work.bad_levels if work is not None else []
        self.queue_ok = queue_ok
        self.reasons: list[Reason] = []
        self.evicted = False
        self.new_pods: list[tuple[Pod, int]] = []
        self.evicted_pods: set[str] = set()
        self.moved: set[str] = set()
        self.given_up: Reason | None = None  # placed this cycle, then taken back by a reclaim

    @classmethod
    def settled(cls, gang: Gang, queue_ok: bool, ready: bool, bad_levels: list[str],
                build: Callable[[Gang], tuple[GangTree, GangWork]]) -> GangRun:
        """A gang whose pods are all bound and that has no subgroups; `ready`: its bound
        pods meet its minimum; `build` makes its tree and placement state when needed."""
        run = cls(gang, None, None, queue_ok)
        run._build = build
        run._ready = ready
        run.valid = True
        run.bad_levels = bad_levels
        return run

    def _built(self) -> None:
        build, self._build = self._build, None
        self._tree, self._work = build(self.gang)

    @property
    def tree(self) -> GangTree | None:
        if self._build is not None:
            self._built()
        return self._tree

    @property
    def work(self) -> GangWork | None:
        if self._build is not None:
            self._built()
        return self._work

    def ready(self) -> bool:
        """Its minimum is met by the pods bound and placed so far (valid gangs only)."""
        if self._build is not None:
            return self._ready  # nothing of it can have been placed yet
        return self._work.ready()

    def has_pending(self) -> bool:
        """It has pods not bound and not placed (valid gangs only)."""
        return self._build is None and self._work.has_pending()

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
        tree = self.tree
        if tree is None:
            bound = [pod for pod in self.gang.pods if pod.node is not None]
            return bound, []
        evicted = self.evicted_pods
        bound_by_node = [[pod for pod in node.pods
                          if pod.node is not None and pod.name not in evicted]
                         for node in tree.nodes]
        keep = core_counts(tree, [len(bound) for bound in bound_by_node])
        for leaf in tree.leaves:
            bound = bound_by_node[leaf]
            core.extend(bound[:keep[leaf]])
            surplus.extend(reversed(bound[keep[leaf]:]))
        return core, surplus
