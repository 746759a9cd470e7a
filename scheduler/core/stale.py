"""Stale gangs (SCHEDULING.md step 8).

A gang with running pods that is not ready by its own rule (only required subgroups count, as
`is_ready` ignores optional children beyond `min_subgroup`) is stale. The Django layer stores
`since` (`Gang.below_min_since`) from the result; once `now - since >= grace` the whole gang is
evicted. Grace: `Gang.staleness_grace_seconds` if set (negative disables eviction, as KAI's
`stalenessGracePeriod`), else `SchedulerConfig.stale_grace_seconds` (60 s).

Choice: stale eviction applies to non-preemptible gangs too - a broken gang holds GPUs without
running, which is exactly what this action exists for (KAI does the same). It happens before
allocation, so the freed capacity is usable in the same cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.model import Gang, SchedulerConfig
from scheduler.core.readiness import GangTree, is_ready


@dataclass(frozen=True)
class StaleVerdict:
    since: float
    evict_at: float | None
    evict: bool


def judge_stale(gang: Gang, tree: GangTree, bound_counts: list[int], now: float,
                config: SchedulerConfig) -> StaleVerdict | None:
    """None when the gang has no running pods or is ready; else when it is (to be) evicted."""
    if not any(bound_counts[leaf] for leaf in tree.leaves):
        return None
    if is_ready(tree, bound_counts):
        return None
    return below_minimum(gang, now, config)


def below_minimum(gang: Gang, now: float, config: SchedulerConfig) -> StaleVerdict:
    """The verdict on a gang with running pods that is not ready."""
    since = now if gang.below_min_since is None else gang.below_min_since
    grace = (config.stale_grace_seconds if gang.staleness_grace_seconds is None
             else gang.staleness_grace_seconds)
    if grace < 0:
        return StaleVerdict(since, None, False)
    evict_at = since + grace
    return StaleVerdict(since, evict_at, now >= evict_at)
