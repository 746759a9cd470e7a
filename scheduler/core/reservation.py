"""Reservations and backfill: a large gang that waits is not overtaken forever (EASY backfill).

A gang first in its leaf queue that has waited `SchedulerConfig.reserve_after_seconds` and
still cannot be placed gets a **reservation** when its turn comes in the allocation order:

1. the start: the running work is released, in the order of its deadlines (a running gang ends
   by `running_since + exec_timeout`, a gang placed this cycle by `now + exec_timeout`), until
   the gang's minimum can be placed (its normal all-or-nothing placement, topology included):
   the first such deadline is its expected start. Each node's releases form a `Timeline`,
   built once per cycle; walking it once per node gives the first time enough nodes could
   hold the gang's largest pods, and placements are tried from there (galloping, then
   bisection, over the later deadlines; at most `MAX_PLACEMENT_TRIES`). Work without an
   exec_timeout is released last, all at once: if the gang needs it gone, the nodes are still
   reserved but no start can be estimated. A gang that would not fit an empty cluster gets no
   reservation;
2. the nodes: that placement, with ties between equally free nodes broken towards the nodes
   freest now (those an earlier cycle's reservation kept free: the choice is stable from cycle
   to cycle although every cycle decides afresh);
3. the hold: on each reserved node, the capacity free now that the gang needs and that the
   work ending by the start will not give back (`need - releasing`, per resource) is held
   from every gang that would delay the start. The rest of the node — and every node the
   gang does not need — stays open: a reservation never blocks a node for work that would not
   run there anyway.

Who may use held capacity (backfill): a gang whose own exec_timeout ends it before the start
(`now + exec_timeout <= start`), and the reserving gang itself. Everyone else — fresh work
without a timeout, or running past the start, preemptible or not — is placed elsewhere;
elastic growth, reclaim and consolidation of other gangs never touch held capacity.
Preemptible (LOW) work already running is not spared: preemptible gangs of the reserving
gang's own leaf queue with a lower priority count as released at once when its nodes are
chosen (its preempt, which runs every cycle with its holds lifted, evicts them as soon as that
lets it start); LOW work of other queues is evicted by its reclaim when the fair-share rules
allow it, and otherwise counted until its deadline like any other work.

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
from dataclasses import dataclass, field

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun, amount_of
from scheduler.core.model import Gang, SchedulerConfig
from scheduler.core.placement import Placer
from scheduler.core.queue_book import QueueBook, describe
from scheduler.core.results import Reason, StartEstimate
from scheduler.core.timelines import INF, GateTimeline, Timeline

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
    # queue -> (limit hold, quota hold): what of its limit (all work) and quota
    # (non-preemptible work) is held from gangs that would still run at the start
    gate_holds: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)


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
        self.timeline: Timeline | None = None
        self.committed: list[GangRun] = []  # runs given pods by the cycle, in order
        self._refreshed = 0
        # queue -> its preemptible runs with pods bound before the cycle (see `_preempted_now`)
        self._preemptible: dict[str, list[GangRun]] | None = None
        self._failed: set[tuple] = set()  # keys of attempts that found no reservation
        self._holding: list[Reservation] | None = None  # see `held_from`
        self._held_words: dict[int, str] = {}  # id(reservation) -> its part of `held_reason`

    # --- who reserves, who may use a hold ------------------------------------------------

    def wants(self, run: GangRun) -> bool:
        config, gang = self.config, run.gang
        if config.reserve_after_seconds < 0 or len(self.reservations) >= config.max_reservations:
            return False
        if any(r.run.gang.queue == gang.queue or r.run is run for r in self.reservations):
            return False
        return self.now - _since(gang) >= config.reserve_after_seconds

    def may_use(self, run: GangRun, reservation: Reservation) -> bool:
        gang = run.gang
        if reservation.run is run:
            return True
        return (reservation.start is not None and gang.exec_timeout is not None
                and self.now + gang.exec_timeout <= reservation.start)

    @contextmanager
    def lifted(self, run: GangRun) -> Iterator[tuple[int, ...]]:
        """Lift the holds `run` may use while it is tried; afterwards hold again what it did
        not take (what it took ends before the start). A
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
            added = amount_of(pod for pod, _node in run.new_pods[before:])
            added_np = run.non_preemptible_share(added, core=True)
            for reservation in usable:
                if reservation.run is run and run.ready():
                    self._drop(reservation)
                    continue
                for node, hold in reservation.holds.items():
                    used = taken.get(node)
                    if used:
                        reservation.holds[node] = [max(0, hold[i] - used[i]) for i in range(3)]
                path = self.book.paths.get(run.gang.queue, ())
                for name, (held, held_np) in reservation.gate_holds.items():
                    if name in path:
                        reservation.gate_holds[name] = (
                            [max(0, held[i] - added[i]) for i in range(3)],
                            [max(0, held_np[i] - added_np[i]) for i in range(3)])
                self._hold(reservation, 1)

    def _hold(self, reservation: Reservation, sign: int) -> None:
        for node, (gpus, cpu, memory) in reservation.holds.items():
            self.cluster.hold(node, sign * gpus, sign * cpu, sign * memory)
        for name, (held, held_np) in reservation.gate_holds.items():
            self.book.hold(name, held, held_np, sign)
            if sign > 0:
                self.book.held_for.setdefault(name, reservation.run.gang.name)

    def _drop(self, reservation: Reservation) -> None:
        """Its gang got placed (its holds are lifted already)."""
        self.reservations.remove(reservation)
        for name in reservation.gate_holds:
            if self.book.held_for.get(name) == reservation.run.gang.name:
                del self.book.held_for[name]
        self.book.reserve(reservation.run.gang.queue, reservation.amount, sign=-1)
        self.reserved_nodes.difference_update(reservation.nodes)

    def held_from(self, run: GangRun) -> Reservation | None:
        """The first reservation holding capacity `run` may not use (for its explanation,
        once the cycle has decided: which reservations hold anything is found once)."""
        if self._holding is None:
            self._holding = [reservation for reservation in self.reservations
                             if any(any(hold) for hold in reservation.holds.values())]
        for reservation in self._holding:
            if not self.may_use(run, reservation):
                return reservation
        return None

    # --- making one ----------------------------------------------------------------------

    def holding(self) -> list[GangRun]:
        """The live runs whose pods take capacity: bound before the cycle, or placed in it
        (once the timeline is built: its first refresh finds the bound ones)."""
        return list(dict.fromkeys([*self.timeline.bound_runs, *self.committed]))

    def reserve(self, run: GangRun, alike: tuple | None = None) -> Reservation | None:
        """`alike`: a key shared by gangs whose attempt ends the same way (same shape and
        queue path, nothing placed yet), or None: a backlog of gangs that find no reservation
        costs one attempt until the cycle places or reserves something."""
        work = run.work
        lower = work.demand(0)
        if lower is None or any(self.cluster.capacity[i] < lower[i] for i in range(3)):
            return None  # not even an empty cluster would hold it
        if alike is not None:
            gang = run.gang
            alike = (alike, gang.queue, gang.priority, gang.preemptible, gang.semi_preemptible,
                     len(self.committed), len(self.reservations))
            if alike in self._failed:
                return None
        reservation = self._reserve(run, lower)
        if reservation is None and alike is not None:
            self._failed.add(alike)
        return reservation

    def _reserve(self, run: GangRun, lower) -> Reservation | None:
        work = run.work
        timeline = self._timeline()
        cluster = self.cluster
        mark = cluster.mark()
        preempted = self._preempted_now(run, timeline)
        gates = GateTimeline(self, run, lower)
        collect, work.collect_notes = work.collect_notes, False
        try:
            found = None if gates.start is None else self._search(run, lower, timeline,
                                                                  gates.start)
            cluster.rollback(mark)
            reservation = None if found is None else self._reservation(
                run, found[0], found[1], timeline, preempted, gates)
        finally:
            work.collect_notes = collect
            cluster.rollback(mark)
            timeline.skip = set()
            timeline.forget(preempted)
        if reservation is None:
            return None
        self._hold(reservation, 1)
        self.reservations.append(reservation)
        self.reserved_nodes.update(reservation.nodes)
        self.book.reserve(run.gang.queue, reservation.amount)
        run.reasons.insert(0, self.reason(reservation))
        return reservation

    def _preempted_now(self, owner: GangRun, timeline: Timeline) -> dict[int, list[int]]:
        """Preemptible work of the owner's queue with a lower priority: the owner's preempt
        evicts it once that lets it start, so it counts as released now (freed virtually
        here, left out of the timeline). Returns what it holds per node."""
        held: dict[int, list[int]] = {}
        if not self.config.preempt:
            return held
        gang = owner.gang
        if self._preemptible is None:
            self._preemptible = {}
            for run in self.timeline.bound_runs:
                if run.gang.preemptible:
                    self._preemptible.setdefault(run.gang.queue, []).append(run)
        for run in self._preemptible.get(gang.queue, ()):
            other = run.gang
            if other.priority >= gang.priority or run.new_pods:
                continue
            for pod in other.pods:
                node = self.cluster.index.get(pod.node) if pod.node is not None else None
                if node is None or pod.name in run.evicted_pods:
                    continue
                self.cluster.take(node, -pod.gpus, -pod.cpu, -pod.memory)
                totals = held.setdefault(node, [0, 0, 0])
                totals[0] += pod.gpus
                totals[1] += pod.cpu
                totals[2] += pod.memory
            timeline.skip.add(other.name)
        timeline.forget(held)
        return held

    def _timeline(self) -> Timeline:
        """Built from every gang the first time, then brought up to date with the gangs the
        cycle gave pods since."""
        if self.timeline is None:
            self.timeline = Timeline(self.cluster, self.now)
            self.timeline.refresh(self.runs)
        else:
            self.timeline.refresh(self.committed[self._refreshed:])
        self._refreshed = len(self.committed)
        return self.timeline

    def _search(self, run: GangRun, lower, timeline: Timeline, not_before: float
                ) -> tuple[float, list[tuple[int, list[int]]]] | None:
        """The earliest deadline after which the gang's minimum is placed, and that
        placement: first the time enough nodes could hold its largest pods (each node's
        releases walked once), then placements from there (galloping, then bisection)."""
        nodes = [i for i in range(len(self.cluster.names))
                 if self.cluster.schedulable[i] and i not in self.reserved_nodes]
        shape, count = _largest_pods(run)
        times = timeline.crossings(nodes, shape, count)
        if not times:
            return None
        if not_before > times[0]:  # its queue's quota or limit frees up later
            times = [not_before] + [t for t in times if t > not_before]
        tries = 0
        failed, position, step, placed = -1, 0, 1, None
        while position < len(times) and tries < MAX_PLACEMENT_TRIES:
            tries += 1
            placed = self._place_at(run, lower, times[position], nodes, timeline)
            if placed is not None:
                break
            failed, position, step = position, position + step, step * 2
        if placed is None and failed < len(times) - 1 and tries < MAX_PLACEMENT_TRIES:
            tries, position = tries + 1, len(times) - 1
            placed = self._place_at(run, lower, times[position], nodes, timeline)
        if placed is None:
            return None
        best = (times[position], placed)
        low, high = failed, position
        while high - low > 1 and tries < MAX_PLACEMENT_TRIES:
            middle = (low + high) // 2
            tries += 1
            placed = self._place_at(run, lower, times[middle], nodes, timeline)
            if placed is None:
                low = middle
            else:
                high, best = middle, (times[middle], placed)
        return best

    def _place_at(self, run: GangRun, lower, when: float, nodes: list[int],
                  timeline: Timeline) -> list[tuple[int, list[int]]] | None:
        """The gang's minimum placed on the cluster as it will be at `when` (every release
        by then made), nodes freest now first among equals; undone afterwards."""
        cluster, work = self.cluster, run.work
        rank = [-free for free in cluster.free_gpu]
        with cluster.trial():
            try:
                for node in nodes:
                    gpus, cpu, memory = timeline.released(node, when)
                    if gpus or cpu or memory:
                        cluster.take(node, -gpus, -cpu, -memory)
                if any(cluster.total_free[r] < lower[r] for r in range(3)):
                    return None
                cluster.rank = rank
                placed_mark = work.mark()
                if not self.placer.place_minimum(work, nodes):
                    return None
                placed = [(node, [pod.gpus, pod.cpu, pod.memory])
                          for _leaf, pod, node in work.tentative]
                work.rollback(placed_mark)
                return placed
            finally:
                cluster.rank = None

    def _reservation(self, run: GangRun, when: float, placed, timeline: Timeline,
                     preempted: dict[int, list[int]], gates: GateTimeline
                     ) -> Reservation | None:
        cluster = self.cluster
        need: dict[int, list[int]] = {}
        for node, amounts in placed:
            total = need.setdefault(node, [0, 0, 0])
            for i in range(3):
                total[i] += amounts[i]
        holds = {}
        start = self.now
        for node, amounts in need.items():
            back = timeline.released(node, when)
            if node in preempted:
                back = tuple(back[i] + preempted[node][i] for i in range(3))
            free = (cluster.free_gpu[node], cluster.free_cpu[node], cluster.free_mem[node])
            holds[node] = [max(0, min(free[i], amounts[i] - back[i])) for i in range(3)]
            if any(timeline.released(node, when)):
                start = max(start, timeline.last_release(node, when))
        untimed = {whose for node in need for whose in timeline.whose(node, INF)} \
            if start == INF else set()
        waits_for = {whose for node in need for whose in timeline.whose(node, start)} \
            if start != INF else set()
        if gates.start is not None and gates.start >= start:
            if gates.start > start:
                waits_for = set()
            start = gates.start
            (untimed if start == INF else waits_for).update(gates.whose)
        if start == INF and not untimed:
            return None  # no work of anyone else will ever make room: its own pods hold it
        amount = [sum(a[i] for a in need.values()) for i in range(3)]
        return Reservation(run, None if start == INF else start, sorted(need), holds, amount,
                           tuple(sorted(waits_for)) if start != INF else (),
                           tuple(sorted(untimed)), gates.holds(start))

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
        """Once the cycle has decided (the reservation's words are made once, for every gang
        it holds capacity from)."""
        owner = reservation.run.gang
        words = self._held_words.get(id(reservation))
        if words is None:
            held = [0, 0, 0]
            for hold in reservation.holds.values():
                for i in range(3):
                    held[i] += hold[i]
            nodes = node_span([self.cluster.names[i] for i, hold in reservation.holds.items()
                               if any(hold)])
            start = ("" if reservation.start is None else
                     f", expected to start in {in_words(reservation.start - self.now)}")
            words = self._held_words[id(reservation)] = (
                f"{describe('gpu', held[0])} on {nodes} are reserved for gang {owner.name!r}, "
                f"which has waited {in_words(self.now - _since(owner))}{start}; gang ")
        return Reason(
            "reserved_for_other",
            f"{words}{run.gang.name!r} would still be running then, so it may not use them",
            queue=owner.queue)

    def estimates(self) -> list[StartEstimate]:
        return [StartEstimate(r.run.gang.name, r.run.gang.queue, r.start,
                              tuple(self.cluster.names[i] for i in r.nodes), r.waits_for,
                              r.untimed, r.amount[0]) for r in self.reservations]


def _largest_pods(run: GangRun) -> tuple[tuple[int, int, int], int]:
    """The largest pod shape among the pods the gang's minimum needs, and how many of them
    (one when the gang may choose among children: a lower bound either way)."""
    work, tree = run.work, run.tree
    needed: list[tuple[int, int, int]] = []
    for leaf in tree.leaves:
        missing = max(0, tree.nodes[leaf].leaf_minimum() - work.counts[leaf])
        start = work.used[leaf]
        needed.extend((p.gpus, p.cpu, p.memory) for p in work.pending[leaf][start:start + missing])
    if not needed:
        return (0, 0, 0), 0
    shape = max(needed)
    optional = any(node.min_subgroup is not None for node in tree.nodes)
    return shape, 1 if optional else needed.count(shape)


def _since(gang: Gang) -> float:
    return gang.created_at if gang.queued_since is None else gang.queued_since
