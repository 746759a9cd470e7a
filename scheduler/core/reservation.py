"""Reservations and backfill: a large gang that waits is not overtaken forever (EASY backfill).

A gang first in its leaf queue that has waited `SchedulerConfig.reserve_after_seconds` and
still cannot be placed gets a **reservation** when its turn comes in the allocation order:

1. the start: the running work is released, in the order of its deadlines (a running gang ends
   by `running_since + exec_timeout`, a gang placed this cycle by `now + exec_timeout`), until
   the gang's minimum can be placed (its normal all-or-nothing placement, topology included):
   the first such deadline is its expected start (galloping, then bisection, over the distinct
   deadlines; at most `MAX_PLACEMENT_TRIES` placements). Work without an exec_timeout is
   released last, all at once: if the gang needs it gone, the nodes are still reserved but no
   start can be estimated. A gang that would not fit an empty cluster gets no reservation;
2. the nodes: that placement, with ties between equally free nodes broken towards the nodes
   freest now (those an earlier cycle's reservation kept free: the choice is stable from cycle
   to cycle although every cycle decides afresh);
3. the hold: on each reserved node, the capacity free now that the gang needs and that the
   work ending by the start will not give back (`need - releasing`, per resource) is held
   from every gang that would delay the start. The rest of the node — and every node the
   gang does not need — stays open: a reservation never blocks a node for work that would not
   run there anyway.

Who may use held capacity (backfill): a gang whose own exec_timeout ends it before the start
(`now + exec_timeout <= start`), the reserving gang itself, and preemptible gangs of the same
leaf queue with a lower priority (the reserving gang may preempt them when its nodes are free:
they are counted as released at once when its start is estimated). Everyone else — fresh work
without a timeout, or running past the start — is placed elsewhere; elastic growth, reclaim and
consolidation of other gangs never touch held capacity.

Fairness: a queue keeps at most one reservation per cycle, a cycle at most
`max_reservations`; a reservation is made at the gang's turn in the fair queue order and then
counts as allocated to its queue (and every ancestor) in that order (`QueueBook.reserve`), so
other queues' gangs go first as if the gang ran. Later reservations never plan on the nodes of
earlier ones. Gates (quota, limit) are never bypassed: a gang a gate refuses gets no
reservation. The core keeps no state: every cycle computes the reservations anew.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun
from scheduler.core.model import Gang, SchedulerConfig
from scheduler.core.placement import Placer
from scheduler.core.queue_book import QueueBook, describe
from scheduler.core.results import Reason, StartEstimate

INF = float("inf")
MAX_PLACEMENT_TRIES = 24


@dataclass
class Reservation:
    run: GangRun
    start: float | None  # None: work without an exec_timeout is in the way
    nodes: list[int]
    holds: dict[int, list[int]]  # node -> capacity held from work that would delay the start
    amount: list[int]
    waits_for: tuple[str, ...]
    untimed: tuple[str, ...]


def label(gang: Gang) -> str:
    return gang.workload or f"gang {gang.name!r}"


def in_words(seconds: float) -> str:
    """A wait as people say it: `42 s`, `7 min`, `2 h 5 min`, `3 d 4 h`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = (seconds + 59) // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def node_span(names: Sequence[str]) -> str:
    names = sorted(names)
    if len(names) <= 4:
        return ", ".join(names)
    return f"{names[0]}–{names[-1]} ({len(names)} nodes)"


def names_in_words(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


class Reserver:
    """The reservations of one cycle, and the holds they put on the cluster."""

    def __init__(self, cluster: Cluster, placer: Placer, book: QueueBook,
                 runs: Sequence[GangRun], now: float, config: SchedulerConfig) -> None:
        self.cluster = cluster
        self.placer = placer
        self.book = book
        self.runs = runs
        self.now = now
        self.config = config
        self.reservations: list[Reservation] = []
        self.reserved_nodes: set[int] = set()

    # --- who reserves, who may use a hold ------------------------------------------------

    def wants(self, run: GangRun) -> bool:
        config, gang = self.config, run.gang
        if config.reserve_after_seconds < 0 or len(self.reservations) >= config.max_reservations:
            return False
        if any(r.run.gang.queue == gang.queue or r.run is run for r in self.reservations):
            return False
        since = gang.created_at if gang.queued_since is None else gang.queued_since
        return self.now - since >= config.reserve_after_seconds

    def may_use(self, run: GangRun, reservation: Reservation) -> bool:
        owner, gang = reservation.run.gang, run.gang
        if reservation.run is run:
            return True
        if (reservation.start is not None and gang.exec_timeout is not None
                and self.now + gang.exec_timeout <= reservation.start):
            return True
        return self._preemptible_by(gang, owner)

    def _preemptible_by(self, gang: Gang, owner: Gang) -> bool:
        return (self.config.preempt and gang.preemptible and gang.queue == owner.queue
                and gang.priority < owner.priority)

    @contextmanager
    def lifted(self, run: GangRun) -> Iterator[tuple[int, ...]]:
        """Lift the holds `run` may use while it is tried; afterwards hold again what it did
        not take (what it took ends before the start, or is preempted by the reserver). A
        reservation whose own gang got placed is dropped. Yields the lifted reservations'
        positions (part of a remembered failure's key)."""
        usable = [r for r in self.reservations if self.may_use(run, r)] \
            if self.reservations else []
        if not usable:
            yield ()
            return
        for reservation in usable:
            self._hold(reservation, -1)
        before = len(run.new_pods)
        try:
            yield tuple(self.reservations.index(r) for r in usable)
        finally:
            taken: dict[int, list[int]] = {}
            for pod, node in run.new_pods[before:]:
                amounts = taken.setdefault(node, [0, 0, 0])
                amounts[0] += pod.gpus
                amounts[1] += pod.cpu
                amounts[2] += pod.memory
            for reservation in usable:
                if reservation.run is run and run.work.ready():
                    self._drop(reservation)
                    continue
                for node, hold in reservation.holds.items():
                    used = taken.get(node)
                    if used:
                        reservation.holds[node] = [max(0, hold[i] - used[i]) for i in range(3)]
                self._hold(reservation, 1)

    def _hold(self, reservation: Reservation, sign: int) -> None:
        for node, (gpus, cpu, memory) in reservation.holds.items():
            self.cluster.hold(node, sign * gpus, sign * cpu, sign * memory)

    def _drop(self, reservation: Reservation) -> None:
        self.reservations.remove(reservation)
        self.book.reserve(reservation.run.gang.queue, reservation.amount, sign=-1)
        self.reserved_nodes.difference_update(reservation.nodes)

    def held_from(self, run: GangRun) -> Reservation | None:
        """The first reservation holding capacity `run` may not use (for its explanation)."""
        for reservation in self.reservations:
            if any(any(hold) for hold in reservation.holds.values()) and \
                    not self.may_use(run, reservation):
                return reservation
        return None

    # --- making one ----------------------------------------------------------------------

    def _releases(self, owner: Gang) -> list[tuple[float, int, int, int, int, str]]:
        """What holds capacity outside earlier reservations' nodes, per gang and node:
        (ends by, node, gpus, cpu, memory, whose), soonest first; INF: no exec_timeout. Work
        `owner` may preempt counts as gone now."""
        cluster, now = self.cluster, self.now
        index = cluster.index
        releases = []
        for run in self.runs:
            if run.evicted:
                continue
            gang = run.gang
            preempted = self._preemptible_by(gang, owner)
            deadline = gang.deadline
            bound_end = now if preempted else INF if deadline is None else deadline
            new_end = now if preempted else (
                deadline if gang.running_since is not None and deadline is not None
                else INF if gang.exec_timeout is None else now + gang.exec_timeout)
            per_node: dict[tuple[float, int], list[int]] = {}
            for pod in gang.pods:
                if pod.node is None or pod.name in run.evicted_pods:
                    continue
                node = index.get(pod.node)
                if node is not None:
                    _add(per_node.setdefault((bound_end, node), [0, 0, 0]), pod)
            for pod, node in run.new_pods:
                _add(per_node.setdefault((new_end, node), [0, 0, 0]), pod)
            whose = label(gang)
            for (end, node), (gpus, cpu, memory) in per_node.items():
                if node not in self.reserved_nodes and cluster.schedulable[node]:
                    releases.append((end, node, gpus, cpu, memory, whose))
        releases.sort(key=lambda item: (item[0], item[1], item[5]))
        return releases

    def reserve(self, run: GangRun) -> Reservation | None:
        work = run.work
        lower = work.demand(0)
        if lower is None:
            return None
        cluster = self.cluster
        releases = self._releases(run.gang)
        free_now = list(cluster.free_gpu)
        start = cluster.mark()
        marks: list[int] = []
        collect, work.collect_notes = work.collect_notes, False
        try:
            found = self._search(work, lower, releases, marks)
            if found is None:
                return None
            count, placed = found
            cluster.rank = [-free for free in free_now]
            preferred = self._place(work, list(range(len(cluster.names))))
            cluster.rank = None
            placed = preferred or placed
        finally:
            work.collect_notes = collect
            cluster.rollback(start)
        reservation = self._reservation(run, lower, releases[:count], placed)
        self._hold(reservation, 1)
        self.reservations.append(reservation)
        self.reserved_nodes.update(reservation.nodes)
        self.book.reserve(run.gang.queue, reservation.amount)
        run.reasons.insert(0, self.reason(reservation))
        return reservation

    def _search(self, work, lower, releases, marks: list[int]
                ) -> tuple[int, list[tuple[int, list[int]]]] | None:
        """The fewest releases (whole deadlines at a time) after which the gang's minimum is
        placed: (how many, the placement), or None."""
        cluster = self.cluster
        bounds = [k for k in range(1, len(releases) + 1)
                  if k == len(releases) or releases[k][0] != releases[k - 1][0]]
        state = {"applied": 0}

        def advance(k: int) -> None:
            applied = state["applied"]
            if k < applied:
                cluster.rollback(marks[k])
                del marks[k:]
            for end, node, gpus, cpu, memory, _whose in releases[applied:k]:
                marks.append(cluster.mark())
                cluster.take(node, -gpus, -cpu, -memory)
            state["applied"] = k

        tries = [0]

        def attempt(position: int):
            advance(bounds[position])
            if any(cluster.total_free[r] < lower[r] for r in range(3)):
                return None
            tries[0] += 1
            return self._place(work, None)

        first = 0
        while first < len(bounds):  # the cluster-wide total first: cheap
            advance(bounds[first])
            if all(cluster.total_free[r] >= lower[r] for r in range(3)):
                break
            first += 1
        failed, step, position, placed = first - 1, 1, first, None
        while position < len(bounds) and tries[0] < MAX_PLACEMENT_TRIES:
            placed = attempt(position)
            if placed is not None:
                break
            failed, position, step = position, position + step, step * 2
        if placed is None and position >= len(bounds) and failed < len(bounds) - 1 \
                and tries[0] < MAX_PLACEMENT_TRIES:
            position = len(bounds) - 1
            placed = attempt(position)
        if placed is None:
            return None
        best = (position, placed)
        low, high = failed, position  # low fails (or is before any), high fits
        while high - low > 1 and tries[0] < MAX_PLACEMENT_TRIES:
            middle = (low + high) // 2
            placed = attempt(middle)
            if placed is None:
                low = middle
            else:
                high, best = middle, (middle, placed)
        advance(bounds[best[0]])
        return bounds[best[0]], best[1]

    def _place(self, work, pool) -> list[tuple[int, list[int]]] | None:
        """The gang's minimum placed on the cluster as it is now, then undone: (node, pod
        amounts) per placed pod, or None."""
        mark = work.mark()
        if not self.placer.place_minimum(work, pool):
            return None
        placed = [(node, [pod.gpus, pod.cpu, pod.memory]) for _leaf, pod, node in work.tentative]
        work.rollback(mark)
        return placed

    def _reservation(self, run: GangRun, lower, released, placed) -> Reservation:
        cluster = self.cluster
        need: dict[int, list[int]] = {}
        for node, amounts in placed:
            total = need.setdefault(node, [0, 0, 0])
            for i in range(3):
                total[i] += amounts[i]
        giving: dict[int, list[int]] = {}
        latest: dict[int, float] = {}
        for end, node, gpus, cpu, memory, _whose in released:
            if node in need:
                totals = giving.setdefault(node, [0, 0, 0])
                totals[0] += gpus
                totals[1] += cpu
                totals[2] += memory
                latest[node] = max(latest.get(node, end), end)
        holds = {}
        for node, amounts in need.items():
            back = giving.get(node, [0, 0, 0])
            free = (cluster.free_gpu[node], cluster.free_cpu[node], cluster.free_mem[node])
            holds[node] = [max(0, min(free[i], amounts[i] - back[i])) for i in range(3)]
        start = max(latest.values(), default=self.now)
        untimed = tuple(sorted({whose for end, node, *_rest, whose in released
                                if end == INF and node in need}))
        waits_for = tuple(sorted({whose for end, node, *_rest, whose in released
                                  if node in need and end == start and end != INF}))
        amount = [sum(a[i] for a in need.values()) for i in range(3)]
        return Reservation(run, None if start == INF else max(start, self.now),
                           sorted(need), holds, amount, () if start == INF else waits_for,
                           untimed)

    # --- what users see ------------------------------------------------------------------

    def reason(self, reservation: Reservation) -> Reason:
        nodes = node_span([self.cluster.names[i] for i in reservation.nodes])
        queue = reservation.run.gang.queue
        if reservation.start is None:
            return Reason(
                "reserved_no_estimate",
                f"reserved nodes {nodes}; no start estimate: "
                f"{names_in_words(reservation.untimed)} on them runs without an exec_timeout",
                queue=queue)
        wait = reservation.start - self.now
        if wait <= 0:
            when = "expected start as soon as the work on them ends"
        elif reservation.waits_for:
            when = (f"expected start in {in_words(wait)}, when "
                    f"{names_in_words(reservation.waits_for)} reaches its exec_timeout")
        else:
            when = f"expected start in {in_words(wait)}"
        return Reason("reserved_start", f"reserved nodes {nodes}; {when}", queue=queue)

    def held_reason(self, run: GangRun, reservation: Reservation) -> Reason:
        held = [0, 0, 0]
        for hold in reservation.holds.values():
            for i in range(3):
                held[i] += hold[i]
        nodes = node_span([self.cluster.names[i] for i, hold in reservation.holds.items()
                           if any(hold)])
        owner = reservation.run.gang
        start = ("" if reservation.start is None else
                 f", expected to start in {in_words(reservation.start - self.now)}")
        return Reason(
            "reserved_for_other",
            f"{describe('gpu', held[0])} on {nodes} are reserved for gang {owner.name!r}, "
            f"which has waited {in_words(self.now - _since(owner))}{start}; gang "
            f"{run.gang.name!r} would still be running then, so it may not use them",
            queue=owner.queue)

    def estimates(self) -> list[StartEstimate]:
        return [StartEstimate(r.run.gang.name, r.run.gang.queue, r.start,
                              tuple(self.cluster.names[i] for i in r.nodes), r.waits_for,
                              r.untimed, r.amount[0]) for r in self.reservations]


def _since(gang: Gang) -> float:
    return gang.created_at if gang.queued_since is None else gang.queued_since


def _add(totals: list[int], pod) -> None:
    totals[0] += pod.gpus
    totals[1] += pod.cpu
    totals[2] += pod.memory
