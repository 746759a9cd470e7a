"""Reclaim (across queues) and preempt (within a queue): evict to place a pending gang.

Victims (SCHEDULING.md step 7):
- only preemptible work: a preemptible gang's elastic surplus pods, then the whole gang; a
  semi-preemptible gang's surplus only; never a non-preemptible pod, never the required core of
  a gang that keeps running;
- only pods bound before this cycle (a gang grown or moved this cycle is not a victim) - or a
  preemptible gang placed whole in this very cycle, which is given up again before it ever
  binds (KAI's pipelined victims: consolidation may place a gang that a reclaim then takes
  back), and counts as the most recently started;
- order: lower queue priority first (KAI "reclaim from less prioritized queue"); within a
  queue priority, surplus pods before whole gangs (least disruption), then lower gang
  priority, most recently started (least work lost), name.

Reclaim: victim V of another queue (KAI's proportion plugin, `reclaimable` + strategies). With
A and B the siblings where the two queue paths diverge:
- the pending gang's side stays within its fair share: its leaf queue must keep
  `allocated + need <= fair_share` before any victim is taken, and once a placement is found
  every level of its path that would be above its fair share must stay strictly less
  saturated (allocated / fair share) than each sibling that lost victims, counting the
  victims taken (KAI's `reclaimingQueuesRemainWithinBoundaries`: a department may go above
  its fair share by reclaiming from a more saturated one, and may free room by losing a
  victim of its own);
- V may be taken while B, before that victim, is still above its floor: above its allocatable
  share (`max(deserved, fair share)`, KAI "maintain fair share"), or - when A would stay
  within its deserved quota with the gang (`allocated(A) + need <= quota(A)`) - above its
  deserved quota (KAI "guarantee deserved quota"). So a victim queue is protected down to its
  deserved quota, not its fair share, and the last victim (a whole gang) may take it below.
Judged on GPUs, and on CPU/memory only when the cluster lacks free CPU/memory for the gang: a
queue's CPU fair share is mostly its own request (CPU quotas are -1), so judging plentiful CPU
would forbid every reclaim. A refused reclaim says which queue was protected, at which floor.
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
from scheduler.core.model import UNLIMITED, Pod
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
    if placed_this_cycle(run):
        started = float("inf")
    return (book.queues[gang.queue].priority, gang.priority, -started, gang.name)


def placed_this_cycle(run: GangRun) -> bool:
    """A gang with no pod bound before the cycle that this cycle placed."""
    return bool(run.new_pods) and all(pod.node is None for pod in run.gang.pods)


def is_victim_candidate(run: GangRun) -> bool:
    gang = run.gang
    if not (run.queue_ok and not run.evicted and not run.moved and run.valid):
        return False
    if placed_this_cycle(run):
        return gang.preemptible
    return (not run.new_pods and (gang.preemptible or gang.semi_preemptible)
            and any(pod.node is not None for pod in gang.pods))


def victim_units(runs: Sequence[GangRun], book: QueueBook) -> list[VictimUnit]:
    """Per queue priority (lowest first): surplus pods of every candidate (in victim order),
    then whole preemptible gangs. `runs` come sorted by `victim_order_key`."""
    units: list[VictimUnit] = []
    tiers: dict[int, list[GangRun]] = {}
    for run in runs:
        tiers.setdefault(book.queues[run.gang.queue].priority, []).append(run)
    for priority in sorted(tiers):
        tier = tiers[priority]
        for run in tier:
            _core, surplus = run.bound_split()
            units.extend(VictimUnit(run, [pod], False) for pod in surplus)
        units.extend(VictimUnit(run, [], True) for run in tier if run.gang.preemptible)
    return units


def _still_bound(unit: VictimUnit) -> list[tuple[Pod, int | None]]:
    """The unit's pods not yet evicted, with their nodes: a whole gang's bound pods (or those
    placed this cycle), or its one surplus pod."""
    victim = unit.run
    if placed_this_cycle(victim):
        pods = [(pod, node) for pod, node in victim.new_pods]
    elif unit.whole:
        pods = [(pod, None) for pod in victim.gang.pods if pod.node is not None]
    else:
        pods = [(pod, None) for pod in unit.pods]
    return [(pod, node) for pod, node in pods if pod.name not in victim.evicted_pods]


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
        protected: tuple[str, str, int, int] | None = None
        for unit in units:
            victim = unit.run
            if victim.evicted:
                continue
            located = _still_bound(unit)
            if not located:
                continue
            pods = [pod for pod, _node in located]
            freed = amount_of(pods)
            if mode == RECLAIMED:
                sides = book.divergence(run.gang.queue, victim.gang.queue)
                if sides is None:
                    continue
                mine, theirs = sides
                if not self._within_share(run.gang.queue, lower, needed):
                    blocked_by_share = run.gang.queue
                    continue
                floor = self._victim_floor(mine, theirs, lower, needed)
                if floor is not None:
                    protected = protected or floor
                    continue
            self._evict_virtually(victim, located, freed)
            taken.append((unit, pods))
            if any(cluster.total_free[r] < lower[r] for r in range(3)):
                continue
            tries += 1
            mark = work.mark()
            if self.placer.place_minimum(work):
                blocker = self._blocker(run, mode, needed, taken)
                if blocker is None:
                    on_success(run, taken)
                    return True
                if blocker:
                    blocked_by_share = blocker
                work.rollback(mark)
            if tries >= MAX_PLACEMENT_TRIES:
                break
        self._restore(taken, start)
        gated = any(reason.code in ("queue_over_limit", "queue_over_quota")
                    for reason in run.reasons)
        if mode == RECLAIMED and not gated:  # a gate is the whole answer
            if blocked_by_share is not None:
                run.reasons.append(self._over_fair_share(blocked_by_share, lower[0]))
            elif protected is not None:
                run.reasons.append(self._protected_reason(run, protected))
        return False

    def _victim_floor(self, mine: str, theirs: str, need: Sequence[int],
                      resources: Sequence[int]) -> tuple[str, str, int, int] | None:
        """None when `theirs` may lose a victim; else (queue, floor kind, floor, in use) on GPUs
        or the first contested resource."""
        if not resources:
            return None  # nothing contested (e.g. CPU the cluster has free): no floor applies
        book = self.book
        in_quota = all(book.quota[mine][r] == UNLIMITED
                       or book.allocated[mine][r] + need[r] <= book.quota[mine][r]
                       for r in resources)
        for r in resources:
            used = book.allocated[theirs][r]
            if used > book.allocatable(theirs, r):
                return None
            quota = book.quota[theirs][r]
            if in_quota and quota != UNLIMITED and used > quota:
                return None
        r = resources[0]
        if in_quota and book.quota[theirs][r] != UNLIMITED:
            return theirs, "deserved quota", book.quota[theirs][r], book.allocated[theirs][r]
        return theirs, "fair share", book.allocatable(theirs, r), book.allocated[theirs][r]

    def _protected_reason(self, run: GangRun, floor: tuple[str, str, int, int]) -> Reason:
        queue, kind, amount, used = floor
        return Reason(
            "reclaim_victim_protected",
            f"gang {run.gang.name!r} could reclaim GPUs from queue {queue!r}, but that queue "
            f"uses {describe('gpu', used)}, not more than its {kind} of "
            f"{describe('gpu', amount)}; reclaiming would take it below that, so its "
            "preemptible work is protected", queue=queue)

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

    def _evict_virtually(self, victim: GangRun, located: list[tuple[Pod, int | None]],
                         freed: list[int]) -> None:
        for pod, node_index in located:
            if node_index is None:
                node_index = self.cluster.index.get(pod.node)
            if node_index is not None:
                self.cluster.take(node_index, -pod.gpus, -pod.cpu, -pod.memory)
        victim.evicted_pods.update(pod.name for pod, _node in located)
        self.book.add(victim.gang.queue, freed, sign=-1)

    def _blocker(self, run: GangRun, mode: str, contested: list[int],
                 taken: list[tuple[VictimUnit, list[Pod]]]) -> str | None:
        """None when the exact placement is allowed; else the queue that would be too
        saturated ('' when a capacity gate refuses it). Reclaim (KAI's
        `reclaimingQueuesRemainWithinBoundaries`): at every level of the gang's path, a queue
        above its fair share with the gang must stay strictly less saturated (allocated /
        fair share) than each sibling that lost victims, counting the victims taken so far."""
        work = run.work
        placed = amount_of(pod for _leaf, pod, _node in work.tentative)
        non_preemptible = run.non_preemptible_share(placed, core=True)
        book = self.book
        if book.gate(run.gang.queue, placed, non_preemptible) is not None:
            return ""
        if mode != RECLAIMED:
            return None
        needed = [r for r in range(3) if placed[r] > 0 and (r == 0 or r in contested)]
        losers = {name for unit, _pods in taken for name in book.paths[unit.run.gang.queue]}
        for name in book.paths[run.gang.queue]:
            parent = book.queues[name].parent
            siblings = [other for other in losers
                        if other != name and book.queues[other].parent == parent]
            for r in needed:
                mine = _saturation(book.allocated[name][r] + placed[r],
                                   book.fair_share[name][r])
                if mine <= 1:
                    continue
                for sibling in siblings:
                    fair = book.fair_share[sibling][r]
                    if fair > 0 and mine >= _saturation(book.allocated[sibling][r], fair):
                        return name
        return None


def _saturation(allocated: int, fair_share: int) -> float:
    if fair_share <= 0:
        return float("inf") if allocated > 0 else 0.0
    return allocated / fair_share
