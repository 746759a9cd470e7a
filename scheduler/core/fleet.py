"""Which cluster a gang goes to (docs/SCHEDULING.md, "Many clusters"): pure, as the core.

A workflow group runs wholly in one backend of its pool. Each backend the pool names is
judged from its own node inventory, Topology and the release times of the work it runs:

- **filter**: the backend is usable (online, not in maintenance), and its nodes could hold the
  gang's minimum with every node empty (16 × 8 GPUs needs 16 whole 8-GPU nodes there, with the
  gang's node selectors and topology constraints met);
- **score**, best first: it starts there now without preempting anything; then the soonest
  estimated start (the first release time of the work there at which the minimum fits, assuming
  nothing else arrives); then the most free GPUs; then the pool's order.

A gang waiting in one backend moves to another that would start it now (`move_target`): at most
once per interval, and only while none of its pods has run.

Each cluster's KAI queues get a share of every quota (`split_quota`), so that KAI, as the
backstop, never lets a pool's guaranteed GPUs across clusters exceed its quota.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler.core.cluster import Cluster
from scheduler.core.model import Gang, Node, Topology
from scheduler.core.placement import GangWork, Placer
from scheduler.core.readiness import InvalidGang, build_tree
from scheduler.core.results import Reason

INF = float("inf")
# How many release times an estimate tries at most: each try is one placement of the minimum.
ESTIMATE_STEPS = 32
MAX_DOMAIN_ATTEMPTS = 16


@dataclass(frozen=True)
class BackendOption:
    """One backend as the fleet choice reads it. `nodes` carry `bound` (what runs on them
    now) and `releases` (when it ends) as the core's snapshot does; `unusable` says why
    nothing may go there (offline, maintenance), None when it may."""

    name: str
    nodes: tuple[Node, ...]
    topology: Topology
    unusable: str | None = None
    # A caller judging many gangs in a row may keep the free-capacity view of the nodes, what
    # they hold included (`live`): each try then places on it and undoes, and `reserve`
    # keeps its placement there, instead of building the view again per try.
    live: Cluster | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Verdict:
    """A backend judged for one gang. `start`: when the gang could start there (`now` when it
    starts at once; None when no release time of the work there would make room, or it can
    never hold the gang). `reason`: why it was passed over (None for the chosen one)."""

    backend: str
    eligible: bool
    starts_now: bool
    start: float | None
    free_gpus: int
    reason: Reason | None = None


@dataclass(frozen=True)
class FleetChoice:
    backend: str | None  # None: no backend of the pool can hold the gang now or ever
    verdicts: tuple[Verdict, ...]  # in the pool's order

    def verdict(self, backend: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.backend == backend), None)


def _unbound(gang: Gang) -> Gang:
    """The gang as it would arrive in a new cluster: none of its pods bound yet."""
    if all(pod.node is None for pod in gang.pods):
        return gang
    return replace(gang, pods=tuple(replace(pod, node=None) for pod in gang.pods))


def _used(nodes: Sequence[Node], at: float | None) -> list[tuple[int, int, int]]:
    """What each node's work holds: now (`at` None), or what is left of it at time `at`."""
    used = []
    for node in nodes:
        held = node.bound or (0, 0, 0)
        if at is not None and node.releases:
            deadlines, gpus, cpu, memory = node.release_sums
            k = bisect_right(deadlines, at)
            if k:
                held = (held[0] - gpus[k - 1], held[1] - cpu[k - 1], held[2] - memory[k - 1])
        used.append(held)
    return used


def _try(gang: Gang, nodes: Sequence[Node], topology: Topology,
         used: Sequence[tuple[int, int, int]] | None) -> tuple[bool, Reason | None]:
    """Whether the gang's minimum fits with `used` held (None: every node empty), and the
    placement's first note when it does not."""
    fits, why, _cluster = _place(gang, nodes, topology, used)
    return fits, why


def with_live(option: BackendOption) -> BackendOption:
    """The option with its free-capacity view kept (see `BackendOption.live`)."""
    return replace(option, live=Cluster(list(option.nodes), option.topology,
                                        _used(option.nodes, None)))


def _place(gang: Gang, nodes: Sequence[Node], topology: Topology,
           used: Sequence[tuple[int, int, int]] | None, live: Cluster | None = None
           ) -> tuple[bool, Reason | None, Cluster | None]:
    """As `_try`, with the cluster the minimum was placed in when it fits (``live``: that
    view, the placement left on it)."""
    try:
        tree = build_tree(gang)
    except InvalidGang as error:
        return False, Reason("invalid_podgroup", str(error)), None
    cluster = live if live is not None else Cluster(list(nodes), topology, used)
    work = GangWork(gang, tree, cluster, topology)
    if work.bad_levels:
        return False, Reason("topology_unknown_level",
                             f"its topology levels {', '.join(work.bad_levels)} are not in "
                             "this cluster's Topology"), None
    lower = work.demand(0)
    if lower is None:
        return False, Reason("minimum_unreachable",
                             "it has fewer pods or subgroups than its minimum requires"), None
    if any(lower[i] > cluster.total_free[i] for i in range(3)):
        return False, Reason("insufficient_gpus" if lower[0] > cluster.total_free[0]
                             else "insufficient_cpu" if lower[1] > cluster.total_free[1]
                             else "insufficient_memory",
                             f"its minimum needs {lower[0]} GPUs; {cluster.total_free[0]} of "
                             f"{cluster.capacity[0]} are free there"), None
    if Placer(cluster, topology, MAX_DOMAIN_ATTEMPTS).place_minimum(work):
        return True, None, cluster
    return False, work.notes[0] if work.notes else Reason(
        "unschedulable", "no set of its nodes meets all of the gang's constraints"), None


def _fits_now(gang: Gang, option: BackendOption) -> tuple[bool, Reason | None]:
    if option.live is None:
        return _try(gang, option.nodes, option.topology, _used(option.nodes, None))
    mark = option.live.mark()
    fits, why, _cluster = _place(gang, option.nodes, option.topology, None, option.live)
    option.live.rollback(mark)
    return fits, why


def reserve(gang: Gang, option: BackendOption) -> tuple[BackendOption, bool]:
    """The backend with the gang's minimum held where it would start now — what a gang
    already sent there takes before the next one is judged —, and whether it fitted (the
    option unchanged when it did not). With a `live` view the placement stays on it (the
    nodes' `bound` then says what they held before)."""
    gang = _unbound(gang)
    if option.unusable is not None:
        return option, False
    if option.live is not None:
        mark = option.live.mark()
        fits, _why, _cluster = _place(gang, option.nodes, option.topology, None, option.live)
        if not fits:
            option.live.rollback(mark)
            return option, False
        option.live.commit()
        return option, True
    fits, _why, cluster = _place(gang, option.nodes, option.topology, _used(option.nodes, None))
    if not fits or cluster is None:
        return option, False
    nodes = tuple(
        node if (node.gpus - cluster.free_gpu[i], node.cpu - cluster.free_cpu[i],
                 node.memory - cluster.free_mem[i]) == (node.bound or (0, 0, 0))
        else replace(node, bound=(node.gpus - cluster.free_gpu[i],
                                  node.cpu - cluster.free_cpu[i],
                                  node.memory - cluster.free_mem[i]))
        for i, node in enumerate(cluster.nodes))
    return replace(option, nodes=nodes), True


def _estimate(gang: Gang, option: BackendOption, now: float) -> float | None:
    """The first release time of the work on the backend at which the minimum fits."""
    times = sorted({entry[0] for node in option.nodes for entry in (node.releases or ())
                    if now < entry[0] < INF})
    if len(times) > ESTIMATE_STEPS:  # spread the tries over the whole horizon, last included
        step = len(times) / ESTIMATE_STEPS
        times = [times[int(i * step)] for i in range(ESTIMATE_STEPS - 1)] + [times[-1]]
    for at in times:
        if _try(gang, option.nodes, option.topology, _used(option.nodes, at))[0]:
            return at
    return None


def shape_of(gang: Gang) -> tuple:
    """What the "could it ever fit" test reads of a gang: its rule and its pods' requests,
    not its names."""
    return (gang.min_member, gang.min_subgroup, gang.subgroups, gang.topology,
            tuple((p.subgroup, p.gpus, p.cpu, p.memory, p.node_selector) for p in gang.pods))


def _whole_nodes(gang: Gang, option: BackendOption, *, now: bool) -> Reason | None:
    """The reason in the words of a gang whose every pod takes a whole node (16 × 8 GPUs on
    8-GPU nodes): "no 16 whole 8-GPU nodes free"; None for any other shape."""
    gpus = {pod.gpus for pod in gang.pods}
    nodes = [node for node in option.nodes if node.schedulable]
    if gang.subgroups or len(gpus) != 1 or not nodes:
        return None
    need, size = max(1, gang.min_member or len(gang.pods)), gpus.pop()
    if size <= 0 or size < max(node.gpus for node in nodes):
        return None
    whole = [node for node in nodes if node.gpus >= size]
    if not now:
        return Reason("insufficient_gpus", f"it has {len(whole)} node(s) of {size} GPUs; "
                                           f"the gang needs {need} whole one(s)")
    if option.live is not None:
        free = sum(1 for i, node in enumerate(option.live.nodes)
                   if node.schedulable and option.live.free_gpu[i] >= size)
    else:
        free = sum(1 for node in whole if node.gpus - (node.bound or (0, 0, 0))[0] >= size)
    if need == 1:
        return Reason("insufficient_gpus", f"no whole {size}-GPU node free")
    return Reason("insufficient_gpus", f"no {need} whole {size}-GPU nodes free ({free} are)")


def judge(gang: Gang, option: BackendOption, now: float,
          ever: dict | None = None) -> Verdict:
    """One backend for one gang. ``ever``: a memo of whether each backend's nodes, empty, hold
    each gang shape, kept by a caller judging many gangs on the same nodes."""
    gang = _unbound(gang)
    free = option.live.total_free[0] if option.live is not None else sum(
        max(0, node.gpus - (node.bound or (0, 0, 0))[0])
        for node in option.nodes if node.schedulable)
    if option.unusable is not None:
        return Verdict(option.name, False, False, None, free,
                       Reason("backend_unusable", option.unusable))
    key = (option.name, shape_of(gang)) if ever is not None else None
    if key is not None and key in ever:
        fits, why = ever[key]
    else:
        fits, why = _try(gang, option.nodes, option.topology, None)
        if key is not None:
            ever[key] = (fits, why)
    if not fits:
        whole = _whole_nodes(gang, option, now=False) if why and why.code == \
            "insufficient_gpus" else None
        return Verdict(option.name, False, False, None, free, Reason(
            why.code if why else "unschedulable",
            f"its nodes could never hold the gang, even empty: "
            f"{(whole or why).message if why else ''}"))
    now_ok, why = _fits_now(gang, option)
    if now_ok:
        return Verdict(option.name, True, True, now, free)
    return Verdict(option.name, True, False, _estimate(gang, option, now), free,
                   _whole_nodes(gang, option, now=True) or why
                   or Reason("unschedulable", "no room for its minimum now"))


def _rank(verdict: Verdict, order: int) -> tuple:
    return (not verdict.starts_now, INF if verdict.start is None else verdict.start,
            -verdict.free_gpus, order)


def choose(gang: Gang, options: Sequence[BackendOption], now: float,
           ever: dict | None = None) -> FleetChoice:
    """The backend the gang goes to among `options` (in the pool's order), and every verdict.
    A gang no backend could hold now or at a known time still goes to the best eligible one
    (it waits there, as on one cluster); None only when no backend could ever hold it."""
    verdicts = [judge(gang, option, now, ever) for option in options]
    eligible = [(v, i) for i, v in enumerate(verdicts) if v.eligible]
    if not eligible:
        return FleetChoice(None, tuple(verdicts))
    best = min(eligible, key=lambda pair: _rank(*pair))[0]
    chosen = replace(best, reason=None)
    return FleetChoice(best.backend, tuple(chosen if v is best else _passed_over(v, best)
                                           for v in verdicts))


def _passed_over(verdict: Verdict, best: Verdict) -> Verdict:
    if not verdict.eligible:
        return verdict
    if verdict.starts_now:  # started now too: lost on free GPUs or the pool's order
        return replace(verdict, reason=Reason(
            "backend_ranked_lower",
            f"it could start here too, but {best.backend} has more free GPUs or comes first "
            "in the pool's order"))
    return verdict


def move_target(gang: Gang, current: str, options: Sequence[BackendOption], now: float, *,
                ran: bool, last_moved: float | None, interval: float,
                ever: dict | None = None) -> str | None:
    """Where a gang waiting in `current` should move: a backend that starts it now while
    `current` does not. Never when one of its pods has run (`ran`), nor twice within
    `interval` seconds."""
    if ran or (last_moved is not None and now - last_moved < interval):
        return None
    here = next((o for o in options if o.name == current), None)
    if here is not None and judge(gang, here, now, ever).starts_now:
        return None
    others = [o for o in options if o.name != current]
    choice = choose(gang, others, now, ever)
    if choice.backend is None or not choice.verdict(choice.backend).starts_now:
        return None
    return choice.backend


def split_quota(quota: int, held: Mapping[str, int], order: Sequence[str],
                waiting: Mapping[str, int] | None = None) -> dict[str, int]:
    """One queue's quota shared among the backends of its pool (`order`: the pool's order).
    Each backend first gets what the queue's guaranteed work holds on its nodes there (`held`),
    then what its guaranteed work sent there and not yet placed needs (`waiting`), each in the
    pool's order while the quota lasts; the first backend gets the rest. Work that holds GPUs
    comes first: a gang sent to one cluster never takes the share of another cluster's
    running work, so KAI, guaranteeing each cluster its share only, never guarantees more than
    the quota across them (a gang over the quota waits in its cluster's queue). The shares
    always sum to `quota` and none is negative; each covers its backend's `held` while their
    sum stays within the quota (a quota lowered below what runs gives the later backends less)."""
    if not order:
        return {}
    shares, left = dict.fromkeys(order, 0), max(0, quota)
    for tier in (held, waiting or {}):
        for backend in order:
            take = min(max(0, tier.get(backend, 0)), left)
            shares[backend] += take
            left -= take
    shares[order[0]] += left
    return shares
