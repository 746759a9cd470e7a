"""One scheduling cycle: `run_cycle(snapshot) -> CycleResult`, the core's single entry point.

Order of actions (KAI's: allocate, reclaim, preempt, stale eviction - stale first here so its
capacity is usable in the same cycle):

1. build every gang's tree; usage of bound pods per node; stale gangs past their grace are
   evicted whole;
2. fair share per queue and resource (`fair_share`);
3. allocation, phase A: queues in order (`QueueBook.pick_leaf`, re-evaluated after every
   gang), gangs by priority then FIFO; each gang's minimum is placed all-or-nothing and kept
   only if the capacity gates pass on its leaf queue and every ancestor; a gang that waited
   long enough and does not fit gets a reservation, which later gangs may only backfill
   (`reservation`);
4. phase B: elastic growth of ready gangs, one pod (or optional child) at a time, each step
   to the queue first in the fair order and, inside it, the gang with the fewest placed pods
   (`grow_all`). Choice: growth comes after every gang's minimum, so elastic pods never take
   the room a waiting gang needs to start;
5. consolidation (running preemptible pods move so a fragmented gang fits), then reclaim, then
   preempt, for gangs still pending (KAI's action order);
6. explanations for every gang left pending; per-queue figures.

Determinism: nodes, queues and gangs are sorted by name, pods by natural name order within a
leaf; nothing iterates an unordered collection. Same snapshot (in any input order) -> same
result.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator, Sequence
from functools import partial

from scheduler.core.cluster import Cluster
from scheduler.core.collector import collector_paused
from scheduler.core.consolidation import Consolidator
from scheduler.core.explain import explain, is_pending
from scheduler.core.fair_share import fair_shares, subtree_requests, subtree_usage
from scheduler.core.gang_run import GangRun, amount_of
from scheduler.core.model import RESOURCES, Gang, Pod, Snapshot, Topology
from scheduler.core.placement import GangWork, Placer, constraint_levels
from scheduler.core.queue_book import ZERO, QueueBook
from scheduler.core.readiness import GangTree, InvalidGang, build_tree, leaf_minimum, ready_counts
from scheduler.core.reclaim import (
    Evictor,
    VictimUnit,
    is_victim_candidate,
    placed_this_cycle,
    victim_order_key,
)
from scheduler.core.reclaim import victim_units as build_victim_units
from scheduler.core.reservation import Reserver
from scheduler.core.results import (
    PREEMPTED,
    RECLAIMED,
    STALE,
    Binding,
    CycleResult,
    Eviction,
    GangExplanation,
    Move,
    QueueStatus,
    Reason,
    ResourceFigures,
    StaleGang,
)
from scheduler.core.stale import StaleVerdict, below_minimum, judge_stale


class _Cycle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.config = snapshot.config
        self.nodes = sorted(snapshot.nodes, key=lambda node: node.name)
        self.queues = sorted(snapshot.queues, key=lambda queue: queue.name)
        self.gangs = sorted(snapshot.gangs, key=lambda gang: gang.name)
        self.bindings: list[Binding] = []
        self.evictions: list[Eviction] = []
        self.moves: list[Move] = []
        self.stale: list[StaleGang] = []
        self.fail_cache: dict[tuple, Reason] = {}
        self.pending: list[GangRun] = []  # schedulable and not ready when allocation began
        self._victim_pool: list[GangRun] | None = None

    # --- setup ------------------------------------------------------------------------------

    def prepare(self) -> None:
        index = {node.name: i for i, node in enumerate(self.nodes)}
        # the nodes' bound totals, when the caller keeps them (see `Node.bound`)
        self.summed = all(node.bound is not None for node in self.nodes)
        used = [list(node.bound) if self.summed else [0, 0, 0] for node in self.nodes]
        surveys = [self._survey(gang, index, used) for gang in self.gangs]
        self.cluster = Cluster(self.nodes, self.snapshot.topology, used, self.config.placement)
        self.placer = Placer(self.cluster, self.snapshot.topology, self.config.max_domain_attempts)
        requested, bound = self._make_runs(surveys)
        capacity = dict(zip(RESOURCES, self.cluster.capacity, strict=True))
        shares = fair_shares(self.queues, capacity, requested, self.config.usage_k_value)
        self.requested = subtree_requests(self.queues, requested)
        self.book = QueueBook(self.queues, shares, self.requested, self.cluster.capacity,
                              subtree_usage(self.queues))
        for leaf, (total, non_preemptible) in bound.items():
            self.book.add(leaf, total, non_preemptible)
        self.reserver = Reserver(self.cluster, self.placer, self.book, self.runs,
                                 self.snapshot.now, self.config)

    def _survey(self, gang: Gang, index: dict[str, int], used: list[list[int]]) -> tuple:
        """One gang before the cycle: its tree (None: settled, see `GangRun.settled`), why it
        is invalid, whether a settled gang is ready, whether it is evicted as stale, and what
        its pods request. The bound pods of every gang not evicted are charged to `used`."""
        if gang.pods and not gang.subgroups and not gang.semi_preemptible:
            settled = self._survey_settled(gang, index, used)
            if settled is not None:
                return settled
        tree = invalid = None
        try:
            tree = build_tree(gang)
        except InvalidGang as error:
            invalid = str(error)
        evicted = tree is not None and self._judge_stale(
            gang, judge_stale(gang, tree, ready_counts(tree), self.snapshot.now, self.config))
        self._charge_bound(gang, evicted, index, used)
        return tree, invalid, None, evicted, amount_of(gang.pods)

    def _survey_settled(self, gang: Gang, index: dict[str, int], used: list[list[int]]
                        ) -> tuple | None:
        """`_survey` of a gang without subgroups whose pods are all bound (None, nothing
        charged, for any other gang): its one leaf holds every pod, so it is ready when it
        has its minimum of pods."""
        amount = gang.settled_amount
        if amount is None:
            return None
        if len(gang.pods) >= leaf_minimum(gang.min_member):  # ready: most gangs, most cycles
            if not self.summed:
                _charge(gang.pods, index, used, 1)
            return None, None, True, False, amount
        verdict = below_minimum(gang, self.snapshot.now, self.config)
        evicted = verdict is not None and verdict.evict
        self._charge_bound(gang, evicted, index, used)
        self._judge_stale(gang, verdict)
        return None, None, False, evicted, amount

    def _charge_bound(self, gang: Gang, evicted: bool, index: dict[str, int],
                      used: list[list[int]]) -> None:
        """The gang's bound pods hold their nodes unless it is evicted: charge them, or, when
        the nodes' totals count them already (`Node.bound`), take an evicted gang's back."""
        if self.summed:
            if evicted:
                _charge(gang.pods, index, used, -1)
        elif not evicted:
            _charge(gang.pods, index, used, 1)

    def _judge_stale(self, gang: Gang, verdict: StaleVerdict | None) -> bool:
        """Record a stale gang's verdict; evict its bound pods when it is past its grace."""
        if verdict is None:
            return False
        self.stale.append(StaleGang(gang.name, verdict.since, verdict.evict_at, verdict.evict))
        if verdict.evict:
            for pod in sorted(gang.pods, key=lambda pod: pod.name):
                if pod.node is not None:
                    self.evictions.append(Eviction(pod.name, gang.name, pod.node, STALE))
        return verdict.evict

    def _make_runs(self, surveys: list[tuple]) -> tuple[dict[str, dict[str, int]],
                                                        dict[str, tuple[list[int], list[int]]]]:
        """One GangRun per gang into `self.runs`; returns what each leaf queue's gangs request,
        and what the bound pods of its live gangs hold (all, non-preemptible)."""
        asked: dict[str, list[int]] = {}
        bound: dict[str, tuple[list[int], list[int]]] = {}
        self.runs: list[GangRun] = []
        queue_names = {queue.name for queue in self.queues}
        leaf_queues = queue_names - {queue.parent for queue in self.queues}
        topology = self.snapshot.topology
        # not a method of the cycle: runs referring back to it would make its objects a
        # reference cycle that only the cyclic collector (a walk of the whole heap) frees
        build = partial(_tree_and_work, cluster=self.cluster, topology=topology)
        for gang, (tree, invalid, ready, evicted, amount) in zip(self.gangs, surveys,
                                                                  strict=True):
            queue_ok = gang.queue in leaf_queues
            if ready is not None:
                bad_levels: list[str] = []
                if gang.topology is not None:
                    constraint_levels(gang.topology, topology, bad_levels)
                run = GangRun.settled(gang, queue_ok, ready, bad_levels, build)
            else:
                work = None if tree is None else GangWork(gang, tree, self.cluster, topology)
                run = GangRun(gang, tree, work, queue_ok)
            run.evicted = evicted
            if not run.valid or not queue_ok or run.bad_levels:
                run.reasons.extend(self._unschedulable_reasons(run, invalid, queue_names))
            self.runs.append(run)
            if queue_ok and not evicted:
                own = asked.get(gang.queue)
                if own is None:
                    own = asked[gang.queue] = [0, 0, 0]
                    bound[gang.queue] = ([0, 0, 0], [0, 0, 0])
                held, held_np = bound[gang.queue]
                total, non_preemptible = (amount, amount) if ready is not None \
                    else self._bound_amounts(run)
                own[0] += amount[0]
                own[1] += amount[1]
                own[2] += amount[2]
                held[0] += total[0]
                held[1] += total[1]
                held[2] += total[2]
                if not gang.preemptible:
                    held_np[0] += non_preemptible[0]
                    held_np[1] += non_preemptible[1]
                    held_np[2] += non_preemptible[2]
        requested = {leaf: dict(zip(RESOURCES, amount, strict=True))
                     for leaf, amount in asked.items()}
        return requested, bound

    @staticmethod
    def _bound_amounts(run: GangRun) -> tuple[list[int], list[int]]:
        """What a gang's bound pods hold, and the part that is non-preemptible unless the gang
        is preemptible (a semi-preemptible gang's core)."""
        core, surplus = run.bound_split()
        core_amount = amount_of(core)
        total = [a + b for a, b in zip(core_amount, amount_of(surplus), strict=True)]
        return total, core_amount if run.gang.semi_preemptible else total

    def _unschedulable_reasons(self, run: GangRun, invalid: str | None,
                               queue_names: set[str]) -> list[Reason]:
        """What keeps a gang from ever being placed: its spec, its queue, its topology levels."""
        gang, reasons = run.gang, []
        if not run.valid:
            reasons.append(Reason("invalid_podgroup",
                                  f"gang {gang.name!r} is invalid: {invalid}",
                                  queue=gang.queue))
        if gang.queue not in queue_names:
            reasons.append(Reason("queue_not_found", f"queue {gang.queue!r} does not exist",
                                  queue=gang.queue))
        elif not run.queue_ok:
            reasons.append(Reason("queue_not_leaf",
                                  f"queue {gang.queue!r} has child queues; only leaf "
                                  "queues hold jobs", queue=gang.queue))
        if run.bad_levels:
            levels = ", ".join(sorted(set(run.bad_levels)))
            reasons.append(Reason("topology_unknown_level",
                                  f"topology level(s) {levels} are not levels of "
                                  f"topology {self.snapshot.topology.name!r}"))
        return reasons

    # --- allocation -------------------------------------------------------------------------

    def schedulable(self, run: GangRun) -> bool:
        return run.valid and run.queue_ok and not run.evicted and not run.bad_levels

    def still_pending(self) -> list[GangRun]:
        """The runs that are schedulable and not ready now: among those that were pending
        when allocation began, as no run becomes schedulable or stops being ready during a
        cycle (placed pods only add to a gang, evicted ones leave it unschedulable)."""
        return [run for run in self.pending if self.schedulable(run) and not run.ready()]

    def by_queue_order(self, runs: list[GangRun], attempt) -> None:
        """Attempt runs queue by queue in the fair order, re-picking after every gang."""
        queues: dict[str, deque[GangRun]] = {}
        for run in sorted(runs, key=lambda run: run.order_key):
            queues.setdefault(run.gang.queue, deque()).append(run)
        remaining = {name: 0 for name in self.book.queues}
        for name, items in queues.items():
            for ancestor in self.book.paths[name]:
                remaining[ancestor] += len(items)
        heads: dict[str, tuple[int, int, int]] = {}

        def head_demand(leaf: str) -> tuple[int, int, int]:
            demand = heads.get(leaf)
            if demand is None:
                demand = heads[leaf] = queues[leaf][0].work.demand(0) or ZERO
            return demand

        while True:
            leaf = self.book.pick_leaf(remaining, head_demand)
            if leaf is None:
                return
            run = queues[leaf].popleft()
            heads.pop(leaf, None)
            for ancestor in self.book.paths[leaf]:
                remaining[ancestor] -= 1
            attempt(run)

    def place_minimum(self, run: GangRun) -> None:
        if run.ready():
            return
        if self.reserver.reservations:
            with self.reserver.lifted(run) as lifted:
                outcome = self._place_minimum(run, lifted)
        else:
            outcome = self._place_minimum(run, ())
        if outcome == "no_room" and self.reserver.wants(run):
            self.reserver.reserve(run, self._cache_key(run))

    def _place_minimum(self, run: GangRun, lifted: tuple[int, ...]) -> str:
        """`placed`, `no_room` (capacity, or a queue gate that running work will free) or
        `refused` (a gate it is above on its own, or it can never be ready)."""
        work = run.work
        cache_key = self._cache_key(run, lifted)
        if cache_key is not None and cache_key in self.fail_cache:
            run.reasons.append(self.fail_cache[cache_key])
            return "no_room"
        lower = work.demand(0)
        if lower is None:
            self.placer.place_subtree(work, 0, None)  # records the reason
            return "refused"
        non_preemptible = run.non_preemptible_share(list(lower), True)
        gate = self.book.gate(run.gang.queue, lower, non_preemptible)
        if gate is not None:
            run.reasons.append(gate)
            # work that ends will make room in its queue: worth a reservation
            return ("no_room" if self.book.fits_ever(run.gang.queue, lower, non_preemptible)
                    else "refused")
        if any(self.cluster.total_free[r] < lower[r] for r in range(3)):
            return "no_room"
        mark = work.mark()
        if not self.placer.place_minimum(work):
            if cache_key is not None and work.notes:
                self.fail_cache[cache_key] = work.notes[0]
            return "no_room"
        placed = amount_of(pod for _leaf, pod, _node in work.tentative)
        non_preemptible = run.non_preemptible_share(placed, core=True)
        gate = self.book.gate(run.gang.queue, placed, non_preemptible)
        if gate is not None:
            work.rollback(mark)
            run.reasons.append(gate)
            return "refused"
        self._commit(run, placed, non_preemptible)
        return "placed"

    def _cache_key(self, run: GangRun, lifted: tuple[int, ...] = ()) -> tuple | None:
        """Simple gangs (one leaf, no topology) that failed fail again until capacity frees
        (with the same reservations' holds lifted)."""
        tree = run.tree
        if len(tree.nodes) != 1 or run.work.required[0] is not None:
            return None
        pending = run.work.pending[0]
        if not pending or run.work.counts[0]:
            return None
        first = pending[0]
        signature = (first.gpus, first.cpu, first.memory, first.node_selector)
        if any((p.gpus, p.cpu, p.memory, p.node_selector) != signature for p in pending):
            return None
        return (signature, tree.root.leaf_minimum(), run.work.preferred[0],
                self.cluster.release_epoch, lifted)

    def _commit(self, run: GangRun, placed: list[int], non_preemptible: list[int]) -> None:
        self.book.add(run.gang.queue, placed, non_preemptible)
        self.reserver.committed.append(run)
        for _leaf, pod, node_index in run.work.commit():
            run.new_pods.append((pod, node_index))
            self.bindings.append(Binding(pod.name, run.gang.name, self.cluster.names[node_index]))

    def grow_all(self, runs: list[GangRun]) -> None:
        """Elastic growth, one unit (pod or optional child) at a time: the queue picked in the
        fair order (judged with the next pod), inside it the gang with the highest priority and
        the fewest placed pods, then FIFO (KAI grows jobs pod by pod, so two elastic jobs
        sharing 5 free GPUs end 3 + 2, not 4 + 1). A gang whose next unit does not fit or is
        refused by a gate stops growing this cycle."""
        heaps: dict[str, list] = {}
        steps: dict[int, Iterator[None]] = {}
        remaining = {name: 0 for name in self.book.queues}
        for position, run in enumerate(runs):
            steps[position] = self.placer.grow(run.work, self._accept_growth(run))
            heaps.setdefault(run.gang.queue, []).append(self._grow_key(run, position))
            for ancestor in self.book.paths[run.gang.queue]:
                remaining[ancestor] += 1
        for heap in heaps.values():
            heapq.heapify(heap)

        def head_demand(leaf: str) -> tuple[int, int, int]:
            pod = runs[heaps[leaf][0][-1]].work.next_pod()
            return ZERO if pod is None else (pod.gpus, pod.cpu, pod.memory)

        while True:
            leaf = self.book.pick_leaf(remaining, head_demand)
            if leaf is None:
                return
            position = heapq.heappop(heaps[leaf])[-1]
            run = runs[position]
            run.work.collect_notes = False
            advanced = next(steps[position], False) is None
            run.work.collect_notes = True
            if advanced and run.work.has_pending():
                heapq.heappush(heaps[leaf], self._grow_key(run, position))
                continue
            for ancestor in self.book.paths[leaf]:
                remaining[ancestor] -= 1

    @staticmethod
    def _grow_key(run: GangRun, position: int) -> tuple:
        gang = run.gang
        return (-gang.priority, run.work.placed_count(), gang.created_at, gang.name, position)

    def _accept_growth(self, run: GangRun):
        def accept(work: GangWork, mark: tuple[int, int]) -> bool:
            added = amount_of(pod for _leaf, pod, _node in work.new_since(mark))
            non_preemptible = run.non_preemptible_share(added, core=False)
            if self.book.gate(run.gang.queue, added, non_preemptible) is not None:
                return False
            self._commit(run, added, non_preemptible)
            return True

        return accept

    # --- consolidation ----------------------------------------------------------------------

    def consolidate(self) -> None:
        """KAI's consolidation action for gangs still pending (see `consolidation`)."""
        pending = self.still_pending()
        if not pending:
            return
        state: dict[str, Consolidator | None] = {"consolidator": None}
        failed: set[tuple] = set()

        def attempt(run: GangRun) -> None:
            with self.reserver.lifted(run) as lifted:
                consolidate_for(run, lifted)

        def consolidate_for(run: GangRun, lifted: tuple[int, ...]) -> None:
            lower = run.work.demand(0)
            if lower is None or any(self.cluster.total_free[r] < lower[r] for r in range(3)):
                return
            key = self._cache_key(run, lifted)
            if key is not None and key in failed:
                return
            if self.book.gate(run.gang.queue, lower,
                              run.non_preemptible_share(list(lower), True)) is not None:
                return
            consolidator = state["consolidator"] or Consolidator(
                self.cluster, self.book, self.placer, self.victim_pool())
            state["consolidator"] = consolidator
            moves = consolidator.attempt(run)
            if moves is None:
                if key is not None:
                    failed.add(key)
                return
            for move in moves:
                move.run.moved.add(move.pod.name)
                self.moves.append(Move(move.pod.name, move.run.gang.name,
                                       self.cluster.names[move.source],
                                       self.cluster.names[move.target], run.gang.name))
            placed = amount_of(pod for _leaf, pod, _node in run.work.tentative)
            self._commit(run, placed, run.non_preemptible_share(placed, core=True))
            self.cluster.release_epoch += 1
            state["consolidator"] = None

        self.by_queue_order(pending, attempt)

    # --- eviction ---------------------------------------------------------------------------

    def evict_for(self, mode: str) -> None:
        pending = self.still_pending()
        if not pending:
            return
        evictor = Evictor(self.cluster, self.book, self.placer)
        failed: set[tuple] = set()
        everyone = sorted((victim for victim in self.victim_pool()
                           if is_victim_candidate(victim)),
                          key=lambda victim: victim_order_key(victim, self.book))
        if not everyone:
            return

        def attempt(run: GangRun) -> None:
            with self.reserver.lifted(run) as lifted:
                evict_for(run, lifted)

        def evict_for(run: GangRun, lifted: tuple[int, ...]) -> None:
            candidates = [victim for victim in everyone if is_victim_candidate(victim)
                          and victim is not run and self._eligible(run, victim, mode)]
            if not candidates:
                return
            key = self._cache_key(run, lifted)
            if key is not None and (key, run.gang.queue) in failed:
                return
            units = build_victim_units(candidates, self.book)
            if not evictor.attempt(run, units, mode, lambda r, taken: self._won(r, taken, mode)):
                if key is not None:
                    failed.add((key, run.gang.queue))

        self.by_queue_order(pending, attempt)

    def victim_pool(self) -> list[GangRun]:
        """The runs that may ever lose or move pods (preemptible or semi-preemptible), in run
        order; who among them may now is for the caller to judge."""
        if self._victim_pool is None:
            self._victim_pool = [run for run in self.runs
                                 if run.gang.preemptible or run.gang.semi_preemptible]
        return self._victim_pool

    def _eligible(self, run: GangRun, victim: GangRun, mode: str) -> bool:
        if mode == PREEMPTED:
            return (victim.gang.queue == run.gang.queue
                    and victim.gang.priority < run.gang.priority)
        return victim.gang.queue != run.gang.queue

    def _won(self, run: GangRun, taken: list[tuple[VictimUnit, list]], mode: str) -> None:
        for unit, pods in taken:
            if placed_this_cycle(unit.run):
                self._give_up(unit.run, run, mode)
                continue
            if unit.whole:
                unit.run.evicted = True
            for pod in pods:
                self.evictions.append(Eviction(pod.name, unit.run.gang.name, pod.node, mode,
                                               by_gang=run.gang.name))
        self.cluster.release_epoch += 1
        placed = amount_of(pod for _leaf, pod, _node in run.work.tentative)
        self._commit(run, placed, run.non_preemptible_share(placed, core=True))

    def _give_up(self, victim: GangRun, winner: GangRun, mode: str) -> None:
        """A gang placed this cycle is taken back before it binds: its bindings go, it stays
        pending (its capacity and queue share were released by the evictor)."""
        self.bindings = [b for b in self.bindings if b.gang != victim.gang.name]
        victim.evicted = True
        victim.given_up = Reason(
            f"{mode}_this_cycle",
            f"gang {victim.gang.name!r} was placed and then given up again in this cycle: "
            f"gang {winner.gang.name!r} of queue {winner.gang.queue!r} took its GPUs "
            f"({mode})", queue=victim.gang.queue)

    # --- result -----------------------------------------------------------------------------

    def result(self) -> CycleResult:
        explanations = []
        for run in self.runs:
            if run.given_up is not None:
                explanations.append(GangExplanation(run.gang.name, run.gang.queue,
                                                    (run.given_up,)))
            if run.evicted or not is_pending(run):
                continue
            reasons = explain(run, self.cluster, self.book)
            held = self.reserver.held_from(run) if reasons and run.valid else None
            if held is not None and not any(r.code.startswith(("queue_over", "reserved_"))
                                            for r in reasons):
                reasons.append(self.reserver.held_reason(run, held))
            if reasons:
                explanations.append(GangExplanation(run.gang.name, run.gang.queue,
                                                    tuple(reasons)))
        statuses = []
        for queue in self.queues:
            figures = []
            for i, resource in enumerate(RESOURCES):
                settings = queue.resource(resource)
                figures.append(ResourceFigures(
                    resource=resource, deserved=settings.quota, limit=settings.limit,
                    fair_share=self.book.fair_share[queue.name][i],
                    allocated=self.book.allocated[queue.name][i],
                    allocated_non_preemptible=self.book.allocated_np[queue.name][i],
                    requested=self.requested[queue.name][resource],
                    reserved=self.book.reserved[queue.name][i]))
            statuses.append(QueueStatus(queue.name, queue.parent, queue.priority,
                                        tuple(figures)))
        evictions = sorted(self.evictions, key=lambda e: (e.gang, e.pod))
        by_name = {run.gang.name: run for run in self.runs} if self.stale else {}
        stale = [entry for entry in self.stale
                 if entry.evicted or not _live_and_ready(by_name[entry.gang])]
        return CycleResult(
            now=self.snapshot.now,
            bindings=tuple(sorted(self.bindings, key=lambda b: (b.gang, b.pod))),
            evictions=tuple(evictions),
            explanations=tuple(explanations),
            queues=tuple(statuses),
            stale=tuple(stale),
            moves=tuple(sorted(self.moves, key=lambda m: (m.gang, m.pod))),
            estimates=tuple(sorted(self.reserver.estimates(), key=lambda e: e.gang)))


def _tree_and_work(gang: Gang, cluster: Cluster, topology: Topology
                   ) -> tuple[GangTree, GangWork]:
    tree = build_tree(gang)
    return tree, GangWork(gang, tree, cluster, topology)


def _live_and_ready(run: GangRun) -> bool:
    return run.valid and not run.evicted and run.ready()


def _charge(pods: Sequence[Pod], index: dict[str, int], used: list[list[int]], sign: int
            ) -> None:
    """Add (sign -1: take back) what bound `pods` hold to `used`, per node."""
    for pod in pods:
        if pod.node is not None:
            position = index.get(pod.node)
            if position is not None:
                usage = used[position]
                usage[0] += sign * pod.gpus
                usage[1] += sign * pod.cpu
                usage[2] += sign * pod.memory


def run_cycle(snapshot: Snapshot) -> CycleResult:
    """Schedule one cycle over `snapshot`; pure and deterministic."""
    with collector_paused():
        return _schedule(snapshot)


def _schedule(snapshot: Snapshot) -> CycleResult:
    cycle = _Cycle(snapshot)
    cycle.prepare()
    open_runs = [run for run in cycle.runs if cycle.schedulable(run)
                 and (not run.ready() or run.has_pending())]
    cycle.pending = [run for run in open_runs if not run.ready()]
    cycle.by_queue_order(cycle.pending, cycle.place_minimum)
    # gangs placed just now grow too; no gang without pending pods at the start ever grows
    cycle.grow_all([run for run in open_runs if run.ready() and run.has_pending()])
    if cycle.config.consolidate:
        cycle.consolidate()
    if cycle.config.reclaim:
        cycle.evict_for(RECLAIMED)
    if cycle.config.preempt:
        cycle.evict_for(PREEMPTED)
    return cycle.result()
