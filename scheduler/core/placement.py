"""All-or-nothing gang placement over the subgroup tree, with topology backtracking.

`GangWork` holds one gang's tentative placement (pods -> nodes) on top of a `Cluster`; marks and
rollbacks undo both together. `Placer.place_minimum` makes the root ready or leaves nothing
behind; `Placer.grow` adds elastic children and pods one accepted unit at a time.

How a (sub)group is placed (SCHEDULING.md steps 5-6):
- leaf: its next `min_member` pending pods (natural name order), identical pods placed together
  (one `find_slots` call per distinct request, not one per pod);
- mid-level/root: the `min_subgroup` children (all when unset) are chosen among the unready
  children, fewest placed pods first, spec order on ties; a child that fails is rolled back and
  the next one is tried (with `min_subgroup` unset the first failure ends the attempt);
- topology: a required level restricts the group to one domain of that level. If part of the
  group is already placed (running pods, or a sibling placed earlier) that domain is forced;
  otherwise domains whose aggregate free capacity can hold the group's minimum are tried
  fullest first (bin-pack), up to `max_domain_attempts`, undoing failed attempts. A preferred
  level is tried first, finest level first: the fullest fitting domain of the preferred level,
  then of each coarser level down to the required one (two domains per level, because a
  preference is not worth a long search), then the required domains (or the whole pool).
- elastic growth never moves placed pods and keeps required domains of ancestors that already
  have pods (preferred levels are not re-applied to elastic pods: a documented simplification).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from scheduler.core.cluster import Cluster, domain_label
from scheduler.core.model import Gang, Pod, Topology, TopologyConstraint
from scheduler.core.queue_book import describe
from scheduler.core.readiness import ROOT, GangTree, is_ready, pods_below
from scheduler.core.results import Reason

PREFERRED_DOMAINS_PER_LEVEL = 2


def constraint_levels(constraint: TopologyConstraint | None, topology: Topology,
                      bad_levels: list[str]) -> tuple[int | None, int | None]:
    """The required and preferred level indexes of a constraint; the names that are no level
    of `topology` are added to `bad_levels`."""
    if constraint is None:
        return None, None
    required = topology.level_index(constraint.required_level)
    preferred = topology.level_index(constraint.preferred_level)
    for level, index in ((constraint.required_level, required),
                         (constraint.preferred_level, preferred)):
        if level and index is None:
            bad_levels.append(level)
    return required, preferred


class GangWork:
    """One gang's tentative placement during a cycle."""

    def __init__(self, gang: Gang, tree: GangTree, cluster: Cluster, topology: Topology) -> None:
        self.gang = gang
        self.tree = tree
        self.cluster = cluster
        self.counts = [0] * len(tree.nodes)
        self.pending: list[list[Pod]] = [[] for _ in tree.nodes]
        self.placed_nodes: list[list[int]] = [[] for _ in tree.nodes]
        self.used = [0] * len(tree.nodes)
        self.tentative: list[tuple[int, Pod, int]] = []
        self.notes: list[Reason] = []
        self.collect_notes = True
        for leaf in tree.leaves:
            for pod in tree.nodes[leaf].pods:
                if pod.node is None:
                    self.pending[leaf].append(pod)
                    continue
                self.counts[leaf] += 1
                node_index = cluster.index.get(pod.node)
                if node_index is not None:
                    self.placed_nodes[leaf].append(node_index)
        self.required: list[int | None] = []
        self.preferred: list[int | None] = []
        self.bad_levels: list[str] = []
        for node in tree.nodes:
            required, preferred = constraint_levels(node.constraint, topology, self.bad_levels)
            self.required.append(required)
            self.preferred.append(preferred)

    # --- bookkeeping ------------------------------------------------------------------------

    def mark(self) -> tuple[int, int]:
        return self.cluster.mark(), len(self.tentative)

    def rollback(self, mark: tuple[int, int]) -> None:
        cluster_mark, tentative_mark = mark
        self.cluster.rollback(cluster_mark)
        while len(self.tentative) > tentative_mark:
            leaf, _pod, _node = self.tentative.pop()
            self.used[leaf] -= 1
            self.counts[leaf] -= 1
            self.placed_nodes[leaf].pop()

    def commit(self) -> list[tuple[int, Pod, int]]:
        """Make the tentative placement final; returns (leaf, pod, node) of the new pods."""
        placed = self.tentative
        self.tentative = []
        self.cluster.commit()
        return placed

    def new_since(self, mark: tuple[int, int]) -> list[tuple[int, Pod, int]]:
        return self.tentative[mark[1]:]

    def ready(self, index: int = ROOT) -> bool:
        return is_ready(self.tree, self.counts, index)

    def next_pod(self) -> Pod | None:
        """The first pending pod not yet placed (what elastic growth would add next)."""
        for leaf in self.tree.leaves:
            if self.used[leaf] < len(self.pending[leaf]):
                return self.pending[leaf][self.used[leaf]]
        return None

    def placed_count(self) -> int:
        return sum(self.counts[leaf] for leaf in self.tree.leaves)

    def has_pending(self) -> bool:
        return any(self.used[leaf] < len(self.pending[leaf]) for leaf in self.tree.leaves)

    def anchor(self, index: int) -> int | None:
        """A node already holding a pod of this subtree (forces its required domain)."""
        for leaf in self.tree.subtree_leaves(index):
            if self.placed_nodes[leaf]:
                return self.placed_nodes[leaf][0]
        return None

    def label(self, index: int) -> str:
        if index == ROOT:
            return f"gang {self.gang.name!r}"
        return f"subgroup {self.tree.nodes[index].name!r}"

    def note(self, reason: Reason) -> None:
        if self.collect_notes:
            self.notes.append(reason)

    # --- demand -----------------------------------------------------------------------------

    def demand(self, index: int) -> tuple[int, int, int] | None:
        """Lower bound of what the subtree still needs to become ready; None if it cannot."""
        node = self.tree.nodes[index]
        if node.is_leaf:
            need = max(0, node.leaf_minimum() - self.counts[index])
            start = self.used[index]
            pods = self.pending[index][start:start + need]
            if len(pods) < need:
                return None
            return (sum(p.gpus for p in pods), sum(p.cpu for p in pods),
                    sum(p.memory for p in pods))
        if self.ready(index):
            return (0, 0, 0)
        ready_children = sum(1 for child in node.children if self.ready(child))
        missing = node.required_children() - ready_children
        options = []
        for child in node.children:
            if not self.ready(child):
                child_demand = self.demand(child)
                if child_demand is not None:
                    options.append(child_demand)
        if len(options) < missing:
            return None
        options.sort()
        chosen = options[:max(0, missing)]
        return (sum(d[0] for d in chosen), sum(d[1] for d in chosen), sum(d[2] for d in chosen))


class Placer:
    """Places gangs on a `Cluster`; `max_domain_attempts` bounds topology backtracking."""

    def __init__(self, cluster: Cluster, topology: Topology, max_domain_attempts: int) -> None:
        self.cluster = cluster
        self.topology = topology
        self.max_domain_attempts = max(1, max_domain_attempts)

    def place_minimum(self, work: GangWork, pool: Sequence[int] | None = None) -> bool:
        """Make the root ready (within `pool`, None: anywhere); on failure nothing of this
        attempt stays placed."""
        mark = work.mark()
        if self.place_subtree(work, ROOT, pool):
            return True
        work.rollback(mark)
        return False

    def place_subtree(self, work: GangWork, index: int, pool: Sequence[int] | None) -> bool:
        if work.ready(index):
            return True
        lower = work.demand(index)
        if lower is None:
            work.note(Reason(
                "minimum_unreachable",
                f"{work.label(index)} cannot become ready: it has fewer pending pods or child "
                "subgroups than its minMember/minSubGroup requires"))
            return False
        for candidate in self._candidate_pools(work, index, pool, lower):
            mark = work.mark()
            if self._place_inside(work, index, candidate):
                return True
            work.rollback(mark)
        return False

    def _place_inside(self, work: GangWork, index: int, pool: Sequence[int] | None) -> bool:
        node = work.tree.nodes[index]
        if node.is_leaf:
            need = node.leaf_minimum() - work.counts[index]
            return need <= 0 or self.place_pods(work, index, need, pool)
        ready_children = sum(1 for child in node.children if work.ready(child))
        missing = node.required_children() - ready_children
        position = {child: order for order, child in enumerate(node.children)}
        candidates = sorted((child for child in node.children if not work.ready(child)),
                            key=lambda child: (pods_below(work.tree, child, work.counts),
                                               position[child]))
        for child in candidates:
            if missing <= 0:
                break
            mark = work.mark()
            if self.place_subtree(work, child, pool):
                missing -= 1
                continue
            work.rollback(mark)
            if node.min_subgroup is None:
                break
        if missing > 0:
            if node.min_subgroup is not None:
                work.note(Reason(
                    "subgroup_minimum_not_met",
                    f"{work.label(index)} needs {node.min_subgroup} of its "
                    f"{len(node.children)} child subgroups ready (minSubGroup), but only "
                    f"{node.min_subgroup - missing} fit"))
            return False
        if node.min_member:
            return self._reach_min_member(work, index, pool)
        return True

    def _reach_min_member(self, work: GangWork, index: int, pool: Sequence[int] | None) -> bool:
        """A `min_member` beside children also counts descendant pods: add pods until reached."""
        node = work.tree.nodes[index]
        missing = node.min_member - pods_below(work.tree, index, work.counts)
        for leaf in work.tree.subtree_leaves(index):
            if missing <= 0:
                break
            take = min(missing, len(work.pending[leaf]) - work.used[leaf])
            if take > 0 and self.place_pods(work, leaf, take, self.constrained_pool(work, leaf,
                                                                                     pool)):
                missing -= take
        if missing > 0:
            work.note(Reason(
                "minimum_unreachable",
                f"{work.label(index)} needs {node.min_member} pods (minMember) but only "
                f"{node.min_member - missing} could be placed"))
            return False
        return True

    def place_pods(self, work: GangWork, leaf: int, count: int, pool: Sequence[int] | None
                   ) -> bool:
        """Place the leaf's next `count` pending pods inside `pool` (None: anywhere)."""
        start = work.used[leaf]
        pods = work.pending[leaf][start:start + count]
        if len(pods) < count:
            return False
        groups: dict[tuple, list[Pod]] = {}
        for pod in pods:
            groups.setdefault((pod.gpus, pod.cpu, pod.memory, pod.node_selector), []).append(pod)
        mark = work.mark()
        cluster = self.cluster
        for (gpus, cpu, memory, selector), members in groups.items():
            allowed = cluster.matching(selector)
            slots = cluster.find_slots(len(members), gpus, cpu, memory, allowed, pool)
            if slots is None:
                work.rollback(mark)
                if work.collect_notes and not work.notes:
                    work.note(self._no_fit_reason(work, leaf, members[0], allowed, pool))
                return False
            cursor = 0
            for node_index, pods_here in slots:
                cluster.take(node_index, gpus * pods_here, cpu * pods_here, memory * pods_here)
                for pod in members[cursor:cursor + pods_here]:
                    work.tentative.append((leaf, pod, node_index))
                    work.used[leaf] += 1
                    work.counts[leaf] += 1
                    work.placed_nodes[leaf].append(node_index)
                cursor += pods_here
        return True

    def _no_fit_reason(self, work: GangWork, leaf: int, pod: Pod, allowed, pool) -> Reason:
        cluster = self.cluster
        if allowed is not None and not allowed:
            return selector_no_match(work, leaf, pod)
        nodes = range(len(cluster.names)) if pool is None else pool
        eligible = [i for i in nodes if cluster.schedulable[i]
                    and (allowed is None or i in allowed)]
        largest = max((cluster.free_gpu[i] for i in eligible), default=0)
        where = "no node" if pool is None else "no node of the chosen topology domain"
        code = "insufficient_gpus" if pod.gpus and largest < pod.gpus else "no_node_fits"
        return Reason(code, f"pods of {work.label(leaf)} need {pod_request(pod)} each, and "
                            f"{where} has room for all of them (most free GPUs on one node: "
                            f"{largest})")

    # --- topology ---------------------------------------------------------------------------

    def _candidate_pools(self, work: GangWork, index: int, pool: Sequence[int] | None,
                         lower: tuple[int, int, int]) -> Iterator[Sequence[int] | None]:
        required = work.required[index]
        preferred = work.preferred[index]
        if required is None and preferred is None:
            yield pool
            return
        cluster = self.cluster
        pool_set = None if pool is None else set(pool)
        anchor = work.anchor(index) if required is not None else None
        if anchor is not None:
            key = cluster.domain_of[required][anchor]
            nodes = cluster.domain_nodes[required].get(key, []) if key is not None else []
            yield [i for i in nodes if pool_set is None or i in pool_set]
            return
        coarsest = -1 if required is None else required
        if preferred is not None and preferred > coarsest:
            for level in range(preferred, coarsest, -1):
                for _key, nodes, _free in self._fitting(level, pool, lower
                                                        )[:PREFERRED_DOMAINS_PER_LEVEL]:
                    yield nodes
        if required is None:
            yield pool
            return
        fitting = self._fitting(required, pool, lower)
        if not fitting:
            work.note(self._no_domain_reason(work, index, required, pool, lower))
            return
        for _key, nodes, _free in fitting[:self.max_domain_attempts]:
            yield nodes
        work.note(Reason(
            "topology_no_domain",
            f"{work.label(index)} must fit in one {self.topology.level_name(required)} "
            f"domain; {min(len(fitting), self.max_domain_attempts)} had enough free capacity "
            "in total but none could hold every pod",
            level=self.topology.level_name(required)))

    def _fitting(self, level: int, pool: Sequence[int] | None, lower: tuple[int, int, int]):
        fitting = [(key, nodes, free) for key, nodes, free in self.cluster.domains(level, pool)
                   if free[0] >= lower[0] and free[1] >= lower[1] and free[2] >= lower[2]]
        fitting.sort(key=lambda item: (item[2][0], item[2][1], item[2][2],
                                       tuple("" if part is None else part for part in item[0])))
        return fitting

    def _no_domain_reason(self, work: GangWork, index: int, level: int,
                          pool: Sequence[int] | None, lower: tuple[int, int, int]) -> Reason:
        domains = self.cluster.domains(level, pool)
        level_name = self.topology.level_name(level)
        if not domains:
            return Reason("topology_no_domain",
                          f"{work.label(index)} requires one {level_name} domain, but no "
                          f"schedulable node carries that level's label",
                          level=level_name)
        best_key, _nodes, best_free = max(
            domains, key=lambda item: (item[2][0], tuple("" if p is None else p
                                                         for p in item[0])))
        return Reason("topology_no_domain",
                      f"{work.label(index)} needs {describe('gpu', lower[0])} within one "
                      f"{level_name}; the {level_name} with the most free capacity "
                      f"({domain_label(best_key)}) has {describe('gpu', best_free[0])} free",
                      level=level_name, domain=domain_label(best_key))

    def constrained_pool(self, work: GangWork, index: int, pool: Sequence[int] | None
                         ) -> Sequence[int] | None:
        """`pool` narrowed to the required domains of `index` and its ancestors with pods."""
        cluster = self.cluster
        constraints = []
        current: int | None = index
        while current is not None:
            required = work.required[current]
            if required is not None:
                anchor = work.anchor(current)
                if anchor is not None:
                    constraints.append((required, cluster.domain_of[required][anchor]))
            current = work.tree.nodes[current].parent
        if not constraints:
            return pool
        level, key = max(constraints, key=lambda item: item[0])
        nodes = cluster.domain_nodes[level].get(key, []) if key is not None else []
        pool_set = None if pool is None else set(pool)
        return [i for i in nodes
                if (pool_set is None or i in pool_set)
                and all(cluster.domain_of[lvl][i] == k for lvl, k in constraints)]

    # --- elastic growth ---------------------------------------------------------------------

    def grow(self, work: GangWork, accept: Callable[[GangWork, tuple[int, int]], bool],
             index: int = ROOT) -> Iterator[None]:
        """Add elastic children and pods, one accepted unit per step (a generator: the caller
        advances it once per unit, so growth can alternate between gangs). No mark is held
        across a step, so other gangs may place and commit in between."""
        node = work.tree.nodes[index]
        if node.is_leaf:
            while work.used[index] < len(work.pending[index]):
                mark = work.mark()
                pool = self.constrained_pool(work, index, None)
                if self.place_pods(work, index, 1, pool) and accept(work, mark):
                    yield
                    continue
                work.rollback(mark)
                break
            return
        position = {child: order for order, child in enumerate(node.children)}
        for child in sorted(node.children, key=lambda c: (pods_below(work.tree, c, work.counts),
                                                          position[c])):
            if not work.ready(child):
                mark = work.mark()
                pool = self.constrained_pool(work, index, None)
                if not (self.place_subtree(work, child, pool) and accept(work, mark)):
                    work.rollback(mark)
                    continue
                yield
            yield from self.grow(work, accept, child)


def pod_request(pod: Pod) -> str:
    """What one pod asks for, in words: `8 GPUs, 4 CPU cores`."""
    need = describe("gpu", pod.gpus)
    if pod.cpu:
        need += f", {describe('cpu', pod.cpu)}"
    if pod.memory:
        need += f", {describe('memory', pod.memory)}"
    return need


def selector_text(pod: Pod) -> str:
    return ", ".join(f"{key}={value}" for key, value in pod.node_selector)


def selector_no_match(work: GangWork, leaf: int, pod: Pod) -> Reason:
    return Reason("node_selector_no_match",
                  f"no schedulable node has the labels {selector_text(pod)} that pods of "
                  f"{work.label(leaf)} select")
