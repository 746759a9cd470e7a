"""Consolidation (KAI's consolidation action): move running preemptible pods so a pending gang
fits, when the cluster has the free capacity in total but not on the right nodes.

For a pending gang whose minimum fits the cluster's free capacity (and its queue's gates) but
could not be placed:

1. nodes are cleared one at a time, the node closest to holding one of the gang's largest pods
   first (most free GPUs; among equals the node whose movable pods come first in KAI's victim
   order - lower queue priority, lower gang priority, most recently started - then name
   order): its movable pods (largest first) are evicted virtually until the node could hold
   as many of those pods as it ever can;
2. after each cleared node that adds room for a pod, the gang's minimum is placed (the normal
   all-or-nothing placement); if it fits, every evicted pod is placed again on the capacity
   left (bin-pack, its node selector honoured). Only if ALL of them find a node is the
   consolidation kept: a moved pod is never left without a node, so its gang is never worse
   off. A pod placed back on its own node is not moved at all.

Movable pods: bound before this cycle, of a preemptible gang (whole preemptible gangs; the
semi-preemptible core never moves) that has no topology constraint (moving one pod could break
its domain), was not placed, grown, moved or evicted this cycle. Consolidation takes nothing
from any queue, so no fair-share rule applies; the pending gang's own gates are checked.
Bounded work: at most `MAX_MOVED_PODS` evicted pods and `MAX_PLACEMENT_TRIES` placements per
gang; a gang shape that failed is not retried until capacity changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun, amount_of
from scheduler.core.model import Pod
from scheduler.core.placement import Placer
from scheduler.core.queue_book import QueueBook
from scheduler.core.reclaim import victim_order_key

MAX_MOVED_PODS = 256
MAX_PLACEMENT_TRIES = 32


@dataclass(frozen=True)
class PlannedMove:
    run: GangRun
    pod: Pod
    source: int
    target: int


def is_movable(run: GangRun) -> bool:
    gang = run.gang
    return (run.queue_ok and not run.evicted and not run.new_pods and not run.evicted_pods
            and not run.moved and run.valid and gang.preemptible
            and gang.topology is None
            and all(subgroup.topology is None for subgroup in gang.subgroups))


class Consolidator:
    """Tries to make room for one pending gang by moving running preemptible pods."""

    def __init__(self, cluster: Cluster, book: QueueBook, placer: Placer,
                 runs: Sequence[GangRun]) -> None:
        self.cluster = cluster
        self.book = book
        self.placer = placer
        self.by_node: dict[int, list[tuple[GangRun, Pod]]] = {}
        for run in runs:
            if not is_movable(run):
                continue
            for pod in run.gang.pods:
                node = cluster.index.get(pod.node) if pod.node is not None else None
                if node is not None and cluster.schedulable[node]:
                    self.by_node.setdefault(node, []).append((run, pod))
        for pods in self.by_node.values():
            pods.sort(key=lambda item: (-item[1].gpus, item[1].name))

    def attempt(self, run: GangRun) -> list[PlannedMove] | None:
        """Moves (and the gang's tentative placement in `run.work`) on success, else None with
        nothing changed. The caller commits the gang's placement."""
        work = run.work
        lower = work.demand(0)
        if lower is None or not self.by_node:
            return None
        cluster = self.cluster
        if any(cluster.total_free[r] < lower[r] for r in range(3)):
            return None
        pending = [pod for leaf in run.tree.leaves
                   for pod in work.pending[leaf][work.used[leaf]:]]
        size = max((pod.gpus for pod in pending), default=0)
        if size <= 0:
            return None
        start = cluster.mark()
        evicted: list[tuple[GangRun, Pod, int]] = []
        tries = 0
        for node in self._node_order(size):
            if len(evicted) >= MAX_MOVED_PODS or tries >= MAX_PLACEMENT_TRIES:
                break
            before = cluster.free_gpu[node] // size
            self._clear(node, size, evicted)
            if cluster.free_gpu[node] // size <= before:
                continue
            if any(cluster.total_free[r] < lower[r] for r in range(3)):
                continue
            tries += 1
            mark = work.mark()
            if not self.placer.place_minimum(work):
                continue
            placed = amount_of(pod for _leaf, pod, _node in work.tentative)
            if self.book.gate(run.gang.queue, placed,
                              run.non_preemptible_share(placed, core=True)) is not None:
                work.rollback(mark)
                break
            moves = self._replace(evicted)
            if moves is not None:
                return moves
            work.rollback(mark)
        cluster.rollback(start)
        return None

    def _node_order(self, size: int) -> list[int]:
        """Nodes that could hold a pod of `size` GPUs once their movable pods leave, the one
        needing the fewest GPUs moved first."""
        cluster = self.cluster
        candidates = []
        for node, pods in self.by_node.items():
            free = cluster.free_gpu[node]
            movable = sum(pod.gpus for _run, pod in pods)
            if free < size <= free + movable:
                first = min(victim_order_key(run, self.book) for run, _pod in pods)
                candidates.append((-free, first, node))
        candidates.sort()
        return [node for _free, _first, node in candidates]

    def _clear(self, node: int, size: int, evicted: list[tuple[GangRun, Pod, int]]) -> None:
        """Evict (virtually) the node's movable pods, largest first, until it holds as many
        pods of `size` GPUs as it can."""
        cluster = self.cluster
        pods = self.by_node[node]
        target = (cluster.free_gpu[node] + sum(pod.gpus for _run, pod in pods)) // size * size
        for victim, pod in pods:
            if cluster.free_gpu[node] >= target or len(evicted) >= MAX_MOVED_PODS:
                break
            if any(pod is other for _run, other, _node in evicted):
                continue
            cluster.take(node, -pod.gpus, -pod.cpu, -pod.memory)
            evicted.append((victim, pod, node))

    def _replace(self, evicted: list[tuple[GangRun, Pod, int]]) -> list[PlannedMove] | None:
        """Place every evicted pod again (largest first); None if one finds no node."""
        cluster = self.cluster
        mark = cluster.mark()
        moves: list[PlannedMove] = []
        for victim, pod, source in sorted(evicted, key=lambda item: (-item[1].gpus,
                                                                      item[1].name)):
            allowed = cluster.matching(pod.node_selector)
            if cluster.fits(source, pod.gpus, pod.cpu, pod.memory) > 0 and (
                    allowed is None or source in allowed):
                target = source  # room again where it was: it stays
            else:
                slots = cluster.find_slots(1, pod.gpus, pod.cpu, pod.memory, allowed, None)
                if slots is None:
                    cluster.rollback(mark)
                    return None
                target = slots[0][0]
            cluster.take(target, pod.gpus, pod.cpu, pod.memory)
            if target != source:
                moves.append(PlannedMove(victim, pod, source, target))
        return moves
