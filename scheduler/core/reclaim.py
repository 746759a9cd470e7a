"""Reclaim (across queues) and preempt (within a queue): evict to place a pending gang.

Victims (SCHEDULING.md step 7):
- only preemptible work: a preemptible gang's elastic surplus pods, then the whole gang; a
  semi-preemptible gang's surplus only; never a non-preemptible pod, never the required core of
  a gang that keeps running;
- only pods bound before this cycle (a gang placed or grown this cycle is not a victim);
- order: surplus pods before whole gangs (least disruption), then lower queue priority, lower
  gang priority, most recently started (least work lost), name.

Reclaim: victim V of another queue. With A and B the siblings where the two queue paths
diverge, the pending gang's side must stay within its fair share (`allocated(A) + need <=
fair_share(A)`) and the victim's side must not drop below its fair share
(`allocated(B) - freed >= fair_share(B)`). Judged on GPUs, and on CPU/memory only when the
cluster lacks free CPU/memory for the gang: a queue's CPU fair share is mostly its own request
(CPU quotas are -1), so judging plentiful CPU would forbid every reclaim.
Preempt: V in the same leaf queue with strictly lower priority; no fair-share condition.

Victims are added one unit at a time; once the cluster's free capacity covers the gang's
minimum a full placement is tried (at most `MAX_PLACEMENT_TRIES` times per gang). No minimal
victim set is searched for beyond that order - a documented simplification.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun, amount_of
from scheduler.core.model import Pod
from scheduler.core.placement import Placer
from scheduler.core.queue_book import QueueBook, describe
from scheduler.core.results import RECLAIMED, Reason

MAX_PLACEMENT_TRIES = 64


@dataclass
class VictimUnit:
    run: GangRun
    pods: list[Pod]
    whole: bool


def victim_order_key(run: GangRun, book: QueueBook) -> tuple:
    gang = run.gang
    started = gang.running_since if gang.running_since is not None else gang.created_at
    return (book.queues[gang.queue].priority, gang.priority, -started, gang.name)


def is_victim_candidate(run: GangRun) -> bool:
    gang = run.gang
    return (run.queue_ok and not run.evicted and not run.new_pods and run.work is not None
            and (gang.preemptible or gang.semi_preemptible)
            and any(pod.node is not None for pod in gang.pods))


def victim_units(runs: Sequence[GangRun]) -> list[VictimUnit]:
    """Surplus pods of every candidate (in victim order), then whole preemptible gangs."""
    units: list[VictimUnit] = []
    for run in runs:
        _core, surplus = run.bound_split()
        units.extend(VictimUnit(run, [pod], False) for pod in surplus)
    units.extend(VictimUnit(run, [], True) for run in runs if run.gang.preemptible)
    return units


def _still_bound(unit: VictimUnit) -> list[Pod]:
    """The unit's pods not yet evicted: a whole gang's bound pods, or its one surplus pod."""
    victim = unit.run
    pods = unit.pods if not unit.whole else [
        pod for pod in victim.gang.pods
        if pod.node is not None and pod.name not in victim.evicted_pods]
    return [pod for pod in pods if pod.name not in victim.evicted_pods]


class Evictor:
    """Runs one reclaim or preempt attempt for a pending gang."""

    def __init__(self, cluster: Cluster, book: QueueBook, placer: Placer) -> None:
        self.cluster = cluster
        self.book = book
        self.placer = placer

    def attempt(self, run: GangRun, units: Sequence[VictimUnit], mode: str,
                on_success: Callable[[GangRun, list[tuple[VictimUnit, list[Pod]]]], None]
                ) -> bool:
        work = run.work
        lower = work.demand(0)
        if lower is None:
            return False
        book = self.book
        cluster = self.cluster
        needed = [r for r in range(3)
                  if lower[r] > 0 and (r == 0 or lower[r] > cluster.total_free[r])]
        start = cluster.mark()
        taken: list[tuple[VictimUnit, list[Pod]]] = []
        tries = 0
        blocked_by_share: str | None = None
        for unit in units:
            victim = unit.run
            if victim.evicted:
                continue
            pods = _still_bound(unit)
            if not pods:
                continue
            freed = amount_of(pods)
            if mode == RECLAIMED:
                sides = book.divergence(run.gang.queue, victim.gang.queue)
                if sides is None:
                    continue
                mine, theirs = sides
                if not self._within_share(mine, lower, needed):
                    blocked_by_share = mine
                    continue
                if any(freed[r] and book.allocated[theirs][r] - freed[r]
                       < book.fair_share[theirs][r] for r in needed):
                    continue
            self._evict_virtually(victim, pods, freed)
            taken.append((unit, pods))
            if any(cluster.total_free[r] < lower[r] for r in range(3)):
                continue
            tries += 1
            mark = work.mark()
            if self.placer.place_minimum(work):
                if self._accepted(run, taken, mode, needed):
                    on_success(run, taken)
                    return True
                work.rollback(mark)
            if tries >= MAX_PLACEMENT_TRIES:
                break
        self._restore(taken, start)
        if blocked_by_share is not None and mode == RECLAIMED:
            run.reasons.append(self._over_fair_share(blocked_by_share, lower[0]))
        return False

    def _restore(self, taken: list[tuple[VictimUnit, list[Pod]]], start: int) -> None:
        """Undo a failed attempt's virtual evictions, last first."""
        for unit, pods in reversed(taken):
            self.book.add(unit.run.gang.queue, amount_of(pods), sign=1)
            unit.run.evicted_pods.difference_update(pod.name for pod in pods)
        self.cluster.rollback(start)

    def _over_fair_share(self, queue: str, gpus_needed: int) -> Reason:
        fair = self.book.fair_share[queue][0]
        used = self.book.allocated[queue][0]
        return Reason(
            "queue_over_fair_share",
            f"queue {queue!r} would exceed its fair share of "
            f"{describe('gpu', fair)} ({describe('gpu', used)} in use, this gang needs "
            f"{describe('gpu', gpus_needed)}), so it cannot reclaim resources from other queues",
            queue=queue)

    def _within_share(self, queue: str, need: Sequence[int], resources: Sequence[int]) -> bool:
        book = self.book
        return all(book.allocated[queue][r] + need[r] <= book.fair_share[queue][r]
                   for r in resources)

    def _evict_virtually(self, victim: GangRun, pods: list[Pod], freed: list[int]) -> None:
        for pod in pods:
            node_index = self.cluster.index.get(pod.node)
            if node_index is not None:
                self.cluster.take(node_index, -pod.gpus, -pod.cpu, -pod.memory)
        victim.evicted_pods.update(pod.name for pod in pods)
        self.book.add(victim.gang.queue, freed, sign=-1)

    def _accepted(self, run: GangRun, taken, mode: str, contested: list[int]) -> bool:
        """Gates and (for reclaim) the fair-share rule with the exact placed amount."""
        work = run.work
        placed = amount_of(pod for _leaf, pod, _node in work.tentative)
        non_preemptible = run.non_preemptible_share(placed, core=True)
        ok = self.book.gate(run.gang.queue, placed, non_preemptible) is None
        if ok and mode == RECLAIMED:
            needed = [r for r in range(3) if placed[r] > 0 and (r == 0 or r in contested)]
            for unit, _pods in taken:
                sides = self.book.divergence(run.gang.queue, unit.run.gang.queue)
                if sides is not None and not self._within_share(sides[0], placed, needed):
                    ok = False
                    break
        return ok
