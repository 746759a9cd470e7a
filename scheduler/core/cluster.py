"""Free capacity per node and per topology domain, with undo, built once per cycle.

Data structures chosen for speed on large clusters:
- free GPU/CPU/memory per node in flat lists;
- schedulable nodes indexed by free GPU count (`buckets`: free GPUs -> sorted node indices), so
  bin-packing a k-GPU pod looks at the fullest nodes that can hold it first without a scan;
- per topology level: domain -> its nodes and its aggregate free capacity, so a (sub)group skips
  a domain that cannot hold it without looking at its nodes;
- an undo log: a gang's tentative placement is rolled back in O(pods placed).

Domains: a node's domain at level L is the tuple of its label values for levels 0..L, so equal
rack names in different zones are different racks. A node lacking level L's label is outside
every domain of level L (a missing coarser label is kept as None in the tuple).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from scheduler.core.model import BINPACK, Node, Topology

DomainKey = tuple


class Cluster:
    """Mutable free-capacity view of the snapshot's nodes (sorted by name)."""

    def __init__(self, nodes: Sequence[Node], topology: Topology,
                 used: Sequence[Sequence[int]] | None = None, placement: str = BINPACK) -> None:
        self.nodes = list(nodes)
        self.names = [node.name for node in self.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.binpack = placement == BINPACK
        self.free_gpu = [node.gpus for node in self.nodes]
        self.free_cpu = [node.cpu for node in self.nodes]
        self.free_mem = [node.memory for node in self.nodes]
        if used is not None:
            for i, (gpus, cpu, memory) in enumerate(used):
                self.free_gpu[i] -= gpus
                self.free_cpu[i] -= cpu
                self.free_mem[i] -= memory
        self.schedulable = [node.schedulable for node in self.nodes]
        self.labels = [dict(node.labels) for node in self.nodes]
        self.level_count = len(topology.levels)
        self.domain_of, self.domain_nodes, self.domain_free = self._index_domains(topology)
        self.capacity, self.total_free, self.buckets = self._sum_capacity()
        self.log: list[tuple[int, int, int, int]] = []
        self._indexed = True  # buckets and domain totals follow every change (see `trial`)
        self.release_epoch = 0
        # Tie-break among equally free nodes when placing within a pool (lower first); set only
        # while a reservation chooses its nodes (see `reservation`).
        self.rank: list[int] | None = None
        self._selector_cache: dict[tuple, frozenset[int] | None] = {}
        self._largest_cache: dict[tuple, tuple[int, int, int]] = {}

    def _index_domains(self, topology: Topology) -> tuple[
            list[list[DomainKey | None]], list[dict[DomainKey, list[int]]],
            list[dict[DomainKey, list[int]]]]:
        """Per level: each node's domain, each domain's schedulable nodes and free capacity."""
        domain_of: list[list[DomainKey | None]] = []
        domain_nodes: list[dict[DomainKey, list[int]]] = []
        domain_free: list[dict[DomainKey, list[int]]] = []
        for level in range(self.level_count):
            keys: list[DomainKey | None] = []
            members: dict[DomainKey, list[int]] = {}
            free: dict[DomainKey, list[int]] = {}
            for i, labels in enumerate(self.labels):
                if topology.levels[level].node_label not in labels:
                    keys.append(None)
                    continue
                key = tuple(labels.get(topology.levels[upper].node_label)
                            for upper in range(level + 1))
                keys.append(key)
                if self.schedulable[i]:
                    members.setdefault(key, []).append(i)
                    totals = free.setdefault(key, [0, 0, 0])
                    totals[0] += self.free_gpu[i]
                    totals[1] += self.free_cpu[i]
                    totals[2] += self.free_mem[i]
            domain_of.append(keys)
            domain_nodes.append(members)
            domain_free.append(free)
        return domain_of, domain_nodes, domain_free

    def _sum_capacity(self) -> tuple[list[int], list[int], dict[int, list[int]]]:
        """Capacity and free totals over schedulable nodes; nodes bucketed by free GPUs."""
        capacity = [0, 0, 0]
        total_free = [0, 0, 0]
        buckets: dict[int, list[int]] = {}
        for i, node in enumerate(self.nodes):
            if not self.schedulable[i]:
                continue
            capacity[0] += node.gpus
            capacity[1] += node.cpu
            capacity[2] += node.memory
            total_free[0] += self.free_gpu[i]
            total_free[1] += self.free_cpu[i]
            total_free[2] += self.free_mem[i]
            buckets.setdefault(self.free_gpu[i], []).append(i)
        return capacity, total_free, buckets

    # --- capacity changes -------------------------------------------------------------------

    def take(self, i: int, gpus: int, cpu: int, memory: int) -> None:
        """Reserve capacity on node i (negative amounts release it); logged for rollback."""
        self._apply(i, gpus, cpu, memory)
        self.log.append((i, gpus, cpu, memory))

    def hold(self, i: int, gpus: int, cpu: int, memory: int) -> None:
        """Take (negative: give back) capacity outside the undo log: a reservation's hold,
        which no gang's rollback undoes."""
        self._apply(i, gpus, cpu, memory)

    def release(self, i: int, gpus: int, cpu: int, memory: int) -> None:
        """Free capacity (an eviction); invalidates remembered placement failures."""
        self.take(i, -gpus, -cpu, -memory)
        self.release_epoch += 1

    def _apply(self, i: int, gpus: int, cpu: int, memory: int) -> None:
        if gpus:
            old = self.free_gpu[i]
            self.free_gpu[i] = old - gpus
            if self.schedulable[i] and self._indexed:
                bucket = self.buckets[old]
                del bucket[bisect_left(bucket, i)]
                if not bucket:
                    del self.buckets[old]
                insort(self.buckets.setdefault(old - gpus, []), i)
        self.free_cpu[i] -= cpu
        self.free_mem[i] -= memory
        if not self.schedulable[i]:
            return
        self.total_free[0] -= gpus
        self.total_free[1] -= cpu
        self.total_free[2] -= memory
        if not self._indexed:
            return
        for level in range(self.level_count):
            key = self.domain_of[level][i]
            if key is not None:
                totals = self.domain_free[level][key]
                totals[0] -= gpus
                totals[1] -= cpu
                totals[2] -= memory

    def mark(self) -> int:
        return len(self.log)

    def rollback(self, mark: int) -> None:
        while len(self.log) > mark:
            i, gpus, cpu, memory = self.log.pop()
            self._apply(i, -gpus, -cpu, -memory)

    def commit(self) -> None:
        self.log.clear()

    @contextmanager
    def trial(self) -> Iterator[None]:
        """Changes made inside are undone on leaving. Meanwhile the free-GPU buckets and the
        domains' free totals are left as they were (they are right again once everything is
        undone), so only placements within a pool of nodes, which read neither, may run
        inside: a what-if over many nodes then costs a list update per node."""
        mark = self.mark()
        self._indexed = False
        try:
            yield
        finally:
            self.rollback(mark)
            self._indexed = True

    # --- queries ----------------------------------------------------------------------------

    def matching(self, selector: tuple) -> frozenset[int] | None:
        """Schedulable nodes whose labels satisfy a node selector (None: no selector)."""
        if not selector:
            return None
        cached = self._selector_cache.get(selector)
        if cached is None:
            cached = frozenset(i for i, labels in enumerate(self.labels)
                               if self.schedulable[i]
                               and all(labels.get(key) == value for key, value in selector))
            self._selector_cache[selector] = cached
        return cached

    def largest(self, selector: tuple) -> tuple[int, int, int]:
        """The most GPUs, CPU and memory one schedulable node matching `selector` has in all,
        each resource on its own: a pod asking more than that can never be placed."""
        cached = self._largest_cache.get(selector)
        if cached is None:
            allowed = self.matching(selector)
            nodes = [node for i, node in enumerate(self.nodes) if self.schedulable[i]
                     and (allowed is None or i in allowed)]
            cached = (max((node.gpus for node in nodes), default=0),
                      max((node.cpu for node in nodes), default=0),
                      max((node.memory for node in nodes), default=0))
            self._largest_cache[selector] = cached
        return cached

    def fits(self, i: int, gpus: int, cpu: int, memory: int) -> int:
        """How many pods of this size node i can still take."""
        count = 1 << 30
        if gpus:
            count = min(count, self.free_gpu[i] // gpus)
        elif self.free_gpu[i] < 0:
            return 0
        if cpu:
            count = min(count, self.free_cpu[i] // cpu)
        elif self.free_cpu[i] < 0:
            return 0
        if memory:
            count = min(count, self.free_mem[i] // memory)
        elif self.free_mem[i] < 0:
            return 0
        return max(0, count)

    def find_slots(self, count: int, gpus: int, cpu: int, memory: int,
                   allowed: frozenset[int] | None, pool: Sequence[int] | None
                   ) -> list[tuple[int, int]] | None:
        """Nodes for `count` identical pods: [(node, pods)], or None if they do not all fit.

        `pool` None means every schedulable node (served from the free-GPU buckets); otherwise
        only the pool's nodes. Bin-pack fills the fullest node that fits first; spread puts one
        pod per node per round, emptiest node first.
        """
        if self.binpack:
            return self._binpack(count, gpus, cpu, memory, allowed, pool)
        return self._spread(count, gpus, cpu, memory, allowed, pool)

    def _ordered(self, gpus: int, allowed: frozenset[int] | None, pool: Sequence[int] | None,
                 descending: bool):
        if pool is None:
            assert self._indexed, "a trial places within a pool only"
            keys = sorted((k for k in self.buckets if k >= gpus), reverse=descending)
            for key in keys:
                for i in self.buckets[key]:
                    if allowed is None or i in allowed:
                        yield i
            return
        candidates = [i for i in pool if self.free_gpu[i] >= gpus and self.schedulable[i]
                      and (allowed is None or i in allowed)]
        rank = self.rank
        if descending:
            candidates.sort(key=lambda i: (-self.free_gpu[i], rank[i] if rank else 0, i))
        else:
            candidates.sort(key=lambda i: (self.free_gpu[i], rank[i] if rank else 0, i))
        yield from candidates

    def _binpack(self, count, gpus, cpu, memory, allowed, pool):
        slots: list[tuple[int, int]] = []
        left = count
        for i in self._ordered(gpus, allowed, pool, descending=False):
            room = self.fits(i, gpus, cpu, memory)
            if room <= 0:
                continue
            placed = min(room, left)
            slots.append((i, placed))
            left -= placed
            if not left:
                return slots
        return None if left else slots

    def _spread(self, count, gpus, cpu, memory, allowed, pool):
        order = list(self._ordered(gpus, allowed, pool, descending=True))
        rooms = {i: self.fits(i, gpus, cpu, memory) for i in order}
        order = [i for i in order if rooms[i] > 0]
        placed: dict[int, int] = {}
        left = count
        while left and order:
            for i in order:
                if not left:
                    break
                if rooms[i] > placed.get(i, 0):
                    placed[i] = placed.get(i, 0) + 1
                    left -= 1
            order = [i for i in order if rooms[i] > placed.get(i, 0)]
        if left:
            return None
        return sorted(placed.items())

    def domains(self, level: int, pool: Sequence[int] | None
                ) -> list[tuple[DomainKey, list[int], list[int]]]:
        """(key, nodes, aggregate free) of the level's domains within a pool."""
        if pool is None:
            assert self._indexed, "a trial places within a pool only"
            return [(key, nodes, self.domain_free[level][key])
                    for key, nodes in self.domain_nodes[level].items()]
        grouped: dict[DomainKey, list[int]] = {}
        for i in pool:
            key = self.domain_of[level][i]
            if key is not None and self.schedulable[i]:
                grouped.setdefault(key, []).append(i)
        result = []
        for key, nodes in grouped.items():
            free = [sum(self.free_gpu[i] for i in nodes), sum(self.free_cpu[i] for i in nodes),
                    sum(self.free_mem[i] for i in nodes)]
            result.append((key, nodes, free))
        return result


def domain_label(key: DomainKey) -> str:
    """A domain as shown to users: its label values joined by `/` (e.g. `zone-a/rack-3`)."""
    return "/".join("?" if part is None else part for part in key)
