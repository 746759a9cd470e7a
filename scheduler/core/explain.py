"""Why a gang is still pending, for people (SCHEDULING.md step 9).

Reasons come from three places, most specific first:
1. what the cycle recorded while trying the gang (invalid spec, unknown queue, a capacity gate
   with the queue and numbers, reclaim blocked by the gang's own fair share, or refused because
   every victim queue is at its floor: `reclaim_victim_protected`); a capacity gate is the whole
   answer (free capacity would not help), so nothing else is added after it;
2. a cluster-wide check of the gang's minimum against free capacity
   (`insufficient_gpus` / `insufficient_cpu` / `insufficient_memory`);
3. the first failure the placement search noted (topology domain, node selector, node fit,
   minSubGroup), when the cluster as a whole had room.
Every pending gang gets at least one reason (`unschedulable` when nothing more precise is
known, e.g. the gang lost out to others this cycle).

An explanation names only what could help. A gang whose minimum this cluster could not hold
even with every node empty (more than its schedulable nodes have in all, or a pod it needs that
is larger than any node it may use) is told just that: freeing room - a quota, reclaim,
preemption, other work ending - would never place it, so those reasons are left out.
"""

from __future__ import annotations

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun
from scheduler.core.model import RESOURCES, Pod
from scheduler.core.placement import GangWork, pod_request, selector_no_match, selector_text
from scheduler.core.queue_book import QueueBook, describe
from scheduler.core.readiness import ROOT
from scheduler.core.results import Reason

INSUFFICIENT = {"gpu": "insufficient_gpus", "cpu": "insufficient_cpu",
                "memory": "insufficient_memory"}
# Reasons about the gang's own spec or queue: true whatever the cluster holds.
SPEC_CODES = {"invalid_podgroup", "queue_not_found", "queue_not_leaf", "topology_unknown_level"}


def is_pending(run: GangRun) -> bool:
    """Left pending: its minimum is not met, or it has pending pods and nothing running."""
    if not run.valid or not run.ready():
        return True
    return run.has_pending() and not any(run.work.counts[leaf] for leaf in run.tree.leaves)


def explain(run: GangRun, cluster: Cluster, book: QueueBook) -> list[Reason]:
    """Reasons for a pending gang (empty list when the gang is not pending)."""
    if not is_pending(run):
        return []
    beyond = _beyond_cluster(run, cluster)
    if beyond:
        return [reason for reason in run.reasons if reason.code in SPEC_CODES] + beyond
    reasons = list(run.reasons)
    work = run.work
    blocked = any(reason.code.startswith("queue_over_l") or reason.code == "queue_over_quota"
                  for reason in reasons)
    if work is not None and run.queue_ok and not work.bad_levels and not blocked:
        lower = work.demand(0)
        short = False
        if lower is not None:
            for i, resource in enumerate(RESOURCES):
                if lower[i] > cluster.total_free[i]:
                    short = True
                    reasons.append(_short_of(run, resource, lower[i], cluster))
        if not short and work.notes:
            reasons.append(work.notes[0])
        elif lower is None and work.notes:
            reasons.append(work.notes[0])
    if not reasons:
        reasons.append(Reason(
            "unschedulable",
            f"gang {run.gang.name!r} could not be placed this cycle: no placement met all of "
            "its constraints with the capacity left", queue=run.gang.queue))
    unique: list[Reason] = []
    for reason in reasons:
        if reason not in unique:
            unique.append(reason)
    return unique


def _short_of(run: GangRun, resource: str, needed: int, cluster: Cluster) -> Reason:
    i = RESOURCES.index(resource)
    return Reason(
        INSUFFICIENT[resource],
        f"gang {run.gang.name!r} needs at least {describe(resource, needed)} to start; the "
        f"cluster has {describe(resource, cluster.total_free[i])} free of "
        f"{describe(resource, cluster.capacity[i])}", queue=run.gang.queue)


def _beyond_cluster(run: GangRun, cluster: Cluster) -> list[Reason]:
    """Why the gang's minimum cannot start on this cluster even with every node empty; empty
    when these checks find nothing (which does not prove that it fits)."""
    work = run.work
    if work is None:
        return []
    lower = work.demand(0)
    if lower is None:
        return []
    totals = [_short_of(run, resource, lower[i], cluster)
              for i, resource in enumerate(RESOURCES) if lower[i] > cluster.capacity[i]]
    if totals:
        return totals
    oversized = _oversized_pod(work, ROOT, cluster)
    return [] if oversized is None else [oversized]


def _oversized_pod(work: GangWork, index: int, cluster: Cluster) -> Reason | None:
    """A reason when the subtree cannot become ready because a pod it needs is larger than any
    node it may use (a subgroup with `minSubGroup` may do without some children)."""
    if work.ready(index):
        return None
    node = work.tree.nodes[index]
    if node.is_leaf:
        start = work.used[index]
        needed = work.pending[index][start:start + node.leaf_minimum() - work.counts[index]]
        return next(filter(None, (_too_large(work, index, pod, cluster) for pod in needed)), None)
    reasons = [_oversized_pod(work, child, cluster) for child in node.children]
    if sum(1 for reason in reasons if reason is None) >= node.required_children():
        return None
    return next(reason for reason in reasons if reason is not None)


def _too_large(work: GangWork, leaf: int, pod: Pod, cluster: Cluster) -> Reason | None:
    """A reason when no node `pod` may use could hold it, even empty."""
    if pod.node_selector and not cluster.matching(pod.node_selector):
        return selector_no_match(work, leaf, pod)
    largest = cluster.largest(pod.node_selector)
    for i, (resource, asked) in enumerate(zip(RESOURCES, (pod.gpus, pod.cpu, pod.memory),
                                              strict=True)):
        if asked > largest[i]:
            where = "no node"
            if pod.node_selector:
                where += f" with the labels {selector_text(pod)}"
            return Reason(
                INSUFFICIENT[resource],
                f"pods of {work.label(leaf)} need {pod_request(pod)} each, and {where} has "
                f"{describe(resource, asked)} (the largest has "
                f"{describe(resource, largest[i])}), so they cannot start on this cluster")
    return None
