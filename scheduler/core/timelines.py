"""When capacity and queue shares come back: the release timelines reservations plan on.

`Timeline`: per node, what the work on it gives back at its deadlines (a running gang's
`running_since + exec_timeout`, a gang placed this cycle `now + exec_timeout`; INF without an
exec_timeout). `GateTimeline`: per capped queue on a reserving gang's path, what its
subtree's work gives back of its limit and (non-preemptible) quota.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun, amount_of
from scheduler.core.model import UNLIMITED, Gang, cumulative_releases

if TYPE_CHECKING:
    from scheduler.core.reservation import Reserver

INF = float("inf")
_DEADLINE = itemgetter(0)
_GANG_NAME = attrgetter("gang.name")


def label(gang: Gang) -> str:
    """A gang as users name it: its workflow, else the gang."""
    return gang.workload or f"gang {gang.name!r}"


def ends(gang: Gang, now: float) -> tuple[float, float]:
    """When the gang's pods bound before the cycle, and those placed in it, end at the
    latest: its deadline (a running gang), else `now + exec_timeout`; INF without a timeout."""
    deadline = gang.deadline
    bound = INF if deadline is None else deadline
    if gang.running_since is not None and deadline is not None:
        return bound, deadline
    return bound, INF if gang.exec_timeout is None else now + gang.exec_timeout


class GateTimeline:
    """When the reserving gang's queue gates (limit, and quota for non-preemptible work, on
    its leaf and every ancestor) let it in: the work of each capped queue's subtree gives its
    share back at its deadline. `start` is the first time every gate passes (None: never,
    the gang alone is above a cap), `holds(start)` what each capped queue must keep free of
    work that would still run then (`need - released`, at most what is free now)."""

    def __init__(self, reserver: Reserver, run: GangRun, lower) -> None:
        book, gang = reserver.book, run.gang
        self.book, self.now = book, reserver.now
        self.need = list(lower)
        self.need_np = run.non_preemptible_share(list(lower), True)
        self.whose: set[str] = set()
        self.start: float | None = reserver.now
        capped: dict[str, list[tuple[int, bool]]] = {}
        for name in book.paths[gang.queue]:
            for i in range(3):
                if self.need[i] and book.limit[name][i] != UNLIMITED:
                    capped.setdefault(name, []).append((i, False))
                if self.need_np[i] and book.quota[name][i] != UNLIMITED:
                    capped.setdefault(name, []).append((i, True))
        self.capped = capped
        if not capped:
            return
        if not book.fits_ever(gang.queue, self.need, self.need_np):
            self.start = None
            return
        self.releases: dict[str, list[tuple[float, list[int], list[int], str]]] = {
            name: [] for name in capped}
        for other in reserver.holding():
            if other.evicted or not other.queue_ok or other is run:
                continue
            hit = [name for name in book.paths[other.gang.queue] if name in capped]
            if not hit:
                continue
            bound = [pod for pod in other.gang.pods
                     if pod.node is not None and pod.name not in other.evicted_pods]
            bound_end, new_end = ends(other.gang, reserver.now)
            whose = label(other.gang)
            for end, pods in ((bound_end, bound),
                              (new_end, [pod for pod, _node in other.new_pods])):
                if not pods:
                    continue
                amount = amount_of(pods)
                np = [0, 0, 0] if other.gang.preemptible or other.gang.semi_preemptible \
                    else amount
                for name in hit:
                    self.releases[name].append((end, amount, np, whose))
        for entries in self.releases.values():
            entries.sort(key=lambda entry: entry[0])
        start = reserver.now
        for name, resources in capped.items():
            for i, quota_kind in resources:
                short = self._used(name, i, quota_kind) + self._need(i, quota_kind) \
                    - self._cap(name, i, quota_kind)
                if short <= 0:
                    continue
                end = self._freed_by(name, i, quota_kind, short)
                if end > start:
                    start, self.whose = end, set()
                if end == start:
                    self.whose.update(whose for t, *_amounts, whose in self.releases[name]
                                      if t == end)
        self.start = start

    def _cap(self, name: str, i: int, quota_kind: bool) -> int:
        return self.book.quota[name][i] if quota_kind else self.book.limit[name][i]

    def _used(self, name: str, i: int, quota_kind: bool) -> int:
        book = self.book
        if quota_kind:
            return book.allocated_np[name][i] + book.held_np[name][i]
        return book.allocated[name][i] + book.held[name][i]

    def _need(self, i: int, quota_kind: bool) -> int:
        return self.need_np[i] if quota_kind else self.need[i]

    def _freed_by(self, name: str, i: int, quota_kind: bool, short: int) -> float:
        freed = 0
        for end, amount, np, _whose in self.releases[name]:
            freed += (np if quota_kind else amount)[i]
            if freed >= short:
                return end
        return INF

    def _released(self, name: str, i: int, quota_kind: bool, when: float) -> int:
        return sum((np if quota_kind else amount)[i]
                   for end, amount, np, _whose in self.releases[name] if end <= when)

    def holds(self, start: float) -> dict[str, tuple[list[int], list[int]]]:
        holds: dict[str, tuple[list[int], list[int]]] = {}
        for name, resources in self.capped.items():
            held, held_np = [0, 0, 0], [0, 0, 0]
            for i, quota_kind in resources:
                free = self._cap(name, i, quota_kind) - self._used(name, i, quota_kind)
                value = max(0, min(free, self._need(i, quota_kind)
                                   - self._released(name, i, quota_kind, start)))
                (held_np if quota_kind else held)[i] = value
            if any(held) or any(held_np):
                holds[name] = (held, held_np)
        return holds


class Timeline:
    """When capacity comes back, per node: the deadlines of the work on it (a running gang's
    `running_since + exec_timeout`, a gang placed this cycle `now + exec_timeout`; INF without
    an exec_timeout), with cumulative amounts for look-ups by time. Built once per cycle (from
    the nodes' `Node.releases` when the snapshot carries them) and brought up to date with the
    pods placed since (`refresh`).

    A node's entries are kept in deadline order only: the look-ups read the cumulative amounts
    at the end of a deadline's entries and who releases at a deadline, neither of which
    depends on the order among entries of one deadline."""

    def __init__(self, cluster: Cluster, now: float) -> None:
        self.cluster = cluster
        self.now = now
        # per node: (deadline, gpus, cpu, memory, gang name) of each pod on it (the node's
        # `releases` tuple itself until something changes there)
        self.entries: list[Sequence[tuple[float, int, int, int, str]]] = [
            [] for _ in cluster.names]
        self.counted: dict[GangRun, int] = {}  # run -> its pods placed this cycle, counted
        self.bound_runs: list[GangRun] = []  # live runs with pods bound before the cycle
        self.runs: Sequence[GangRun] | None = None  # every run, once built (see `_run`)
        self._cumulative: dict[int, tuple] = {}
        # entries from the nodes' `releases` (shared, not copied, until a node's change: its
        # sums are then the node's own, worked out once per `Node`), and the changed nodes
        self._given = False
        self._own: set[int] = set()
        self.skip: set[str] = set()  # gangs left out of one reservation's look-ups

    def forget(self, nodes) -> None:
        """Drop the cached sums of `nodes` (their look-ups now leave `skip` out)."""
        for node in nodes:
            self._cumulative.pop(node, None)

    def refresh(self, runs: Sequence[GangRun]) -> None:
        """The first call: the bound and placed pods of `runs`, every run of the cycle in gang
        name order (the cycle's order); later calls: the pods placed since, of the runs
        given."""
        if self.runs is None:
            self.runs = runs
            self._bound(runs)
        entries, counted = self.entries, self.counted
        touched: set[int] = set()
        for run in runs:
            placed = len(run.new_pods)
            seen = counted.get(run, 0)
            if run.evicted or placed == seen:
                continue
            counted[run] = placed
            name = run.gang.name
            end = ends(run.gang, self.now)[1]
            for pod, node in run.new_pods[seen:]:
                if node not in touched:
                    entries[node] = list(entries[node])  # its node's releases, shared so far
                    touched.add(node)
                entries[node].append((end, pod.gpus, pod.cpu, pod.memory, name))
        for node in touched:
            entries[node].sort(key=_DEADLINE)
            self._cumulative.pop(node, None)
            self._own.add(node)

    def _bound(self, runs: Sequence[GangRun]) -> None:
        """The pods bound before the cycle, of the runs not evicted: the nodes' own
        `releases` when they carry them (taking out an evicted gang's), else every pod."""
        cluster, entries = self.cluster, self.entries
        given = all(node.releases is not None for node in cluster.nodes)
        for run in runs:
            gang = run.gang
            if not run.evicted and gang.pods and (gang.settled_amount is not None or any(
                    pod.node is not None for pod in gang.pods)):
                self.bound_runs.append(run)
        if given and not any(run.evicted_pods for run in runs):
            self.entries = [node.releases for node in cluster.nodes]
            self._given = True
            for run in runs:
                if run.evicted:
                    self._take_out(run.gang)
            return
        index = cluster.index
        for run in self.bound_runs:
            gang, evicted = run.gang, run.evicted_pods
            bound_end, name = ends(gang, self.now)[0], gang.name
            for pod in gang.pods:
                if pod.node is not None and (not evicted or pod.name not in evicted):
                    node = index.get(pod.node)
                    if node is not None:
                        entries[node].append((bound_end, pod.gpus, pod.cpu, pod.memory, name))
        for node_entries in entries:
            node_entries.sort(key=_DEADLINE)

    def _take_out(self, gang: Gang) -> None:
        """An evicted gang's bound pods release nothing later: they are gone now."""
        for position in {self.cluster.index.get(pod.node) for pod in gang.pods} - {None}:
            self.entries[position] = [entry for entry in self.entries[position]
                                      if entry[4] != gang.name]
            self._own.add(position)

    def _sums(self, node: int) -> tuple[list[float], list[int], list[int], list[int]]:
        """Per node: the deadlines, and what has come back by each (gpus, cpu, memory)."""
        sums = self._cumulative.get(node)
        if sums is None:
            skip = self.skip
            if skip:
                sums = cumulative_releases(
                    [entry for entry in self.entries[node] if entry[4] not in skip])
            elif self._given and node not in self._own:  # the node's releases as they came
                sums = self.cluster.nodes[node].release_sums
            else:
                sums = cumulative_releases(self.entries[node])
            self._cumulative[node] = sums
        return sums

    def released(self, node: int, when: float) -> tuple[int, int, int]:
        """What the work on `node` has given back by `when`."""
        ends, gpus, cpu, memory = self._sums(node)
        position = bisect_right(ends, when) - 1
        return (gpus[position], cpu[position], memory[position]) if position >= 0 else (0, 0, 0)

    def last_release(self, node: int, when: float) -> float:
        ends = self._sums(node)[0]
        position = bisect_right(ends, when)
        return ends[position - 1] if position else self.now

    def whose(self, node: int, when: float) -> list[str]:
        return [label(self._run(entry[4]).gang) for entry in self.entries[node]
                if entry[0] == when and entry[4] not in self.skip]

    def _run(self, name: str) -> GangRun:
        """The run of gang `name`: found by bisection in the cycle's runs, which are in gang
        name order (a look-up table of every run cost more than the few look-ups)."""
        runs = self.runs
        position = bisect_left(runs, name, key=_GANG_NAME)
        if position < len(runs) and runs[position].gang.name == name:
            return runs[position]
        return next(run for run in runs if run.gang.name == name)

    def crossings(self, nodes: Sequence[int], shape: tuple[int, int, int], count: int
                  ) -> list[float]:
        """The distinct times from which enough of `nodes` could hold `count` pods of
        `shape` (the first is when they first could), INF last when only releasing work
        without a timeout would do; empty when not even that. Per node, the time its k-th
        pod fits is a bisection of its cumulative releases."""
        cluster = self.cluster
        found: list[float] = []
        wanted = [i for i in range(3) if shape[i] > 0]
        if not wanted:
            return [self.now] if count else []
        for node in nodes:
            free = (cluster.free_gpu[node], cluster.free_cpu[node], cluster.free_mem[node])
            sums = self._sums(node)
            ends, by = sums[0], sums[1:]
            k = 1
            while True:
                position = 0
                for i in wanted:
                    short = k * shape[i] - free[i]
                    if short > 0:
                        position = max(position, bisect_left(by[i], short) + 1)
                if position > len(ends):
                    break
                found.append(self.now if position == 0 else ends[position - 1])
                k += 1
                if k > count:
                    break
        if len(found) < count:
            return []
        found.sort()
        first = found[count - 1]
        return sorted({end for end in found if end >= first})


