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
"""

from __future__ import annotations

from scheduler.core.cluster import Cluster
from scheduler.core.gang_run import GangRun
from scheduler.core.model import RESOURCES
from scheduler.core.queue_book import QueueBook, describe
from scheduler.core.results import Reason

INSUFFICIENT = {"gpu": "insufficient_gpus", "cpu": "insufficient_cpu",
                "memory": "insufficient_memory"}


def is_pending(run: GangRun) -> bool:
    """Left pending: its minimum is not met, or it has pending pods and nothing running."""
    if run.work is None:
        return True
    if not run.work.ready():
        return True
    running = any(run.work.counts[leaf] for leaf in run.tree.leaves)
    return run.work.has_pending() and not running


def explain(run: GangRun, cluster: Cluster, book: QueueBook) -> list[Reason]:
    """Reasons for a pending gang (empty list when the gang is not pending)."""
    if not is_pending(run):
        return []
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
                    reasons.append(Reason(
                        INSUFFICIENT[resource],
                        f"gang {run.gang.name!r} needs at least {describe(resource, lower[i])} "
                        f"to start; the cluster has {describe(resource, cluster.total_free[i])}"
                        f" free of {describe(resource, cluster.capacity[i])}",
                        queue=run.gang.queue))
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
