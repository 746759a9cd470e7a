"""Fair share per queue and resource, top-down (SCHEDULING.md step 2).

Among siblings sharing an amount (the cluster for top-level queues, the parent's fair share
below):

1. each sibling first gets its deserved part, `min(quota, requested capped by limit)` - even
   above the amount being divided, as KAI's resource division keeps it (a lone queue of quota
   4 asking for 4 on a 2-GPU cluster has a fair share of 4); quota -1 (KAI: unlimited)
   deserves what it requests (capped by limit) up to the amount. Deserved parts are NOT scaled
   down when the quotas add up to more than the amount: the shares may then sum to more than
   the amount, and nothing is left for step 2;
2. what remains goes over priority buckets, higher priority first; inside a bucket it is split
   by `over_quota_weight` (water-filling: a sibling never gets more than it asked for, and what
   it cannot use goes back to the others), rounded down to whole units. With historical usage
   (KAI's time-based fair share) each round's weight is KAI's
   `max(0, w + k * (w - usage))`, `w` the sibling's weight normalized over the siblings still
   asking, `usage` its decayed usage normalized to the cluster (0..1), `k` the k-value: a
   queue that used much gets less of what is over quota;
3. the units lost to rounding go one at a time, largest fractional remainder first, ties by
   higher weight, then queue name - so results are deterministic.

Choices where the spec is silent:
- a weight of 0 gets nothing over its quota;
- a sibling with nothing requested gets 0 (its share goes to those who asked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from scheduler.core.model import RESOURCES, UNLIMITED, Queue


@dataclass(frozen=True)
class Claimant:
    """One sibling's claim on a shared amount of one resource."""

    name: str
    priority: int
    quota: int
    limit: int
    weight: int
    requested: int
    usage: float = 0.0

    @property
    def cap(self) -> int:
        return self.requested if self.limit < 0 else min(self.requested, self.limit)


def split(amount: int, claimants: Sequence[Claimant], k_value: float = 1.0) -> dict[str, int]:
    """Divide `amount` among siblings; returns name -> share (never above a sibling's cap)."""
    amount = max(0, amount)
    shares = {claimant.name: min(amount, claimant.cap) if claimant.quota == UNLIMITED
              else min(claimant.quota, claimant.cap) for claimant in claimants}
    remaining = max(0, amount - sum(shares.values()))
    buckets = sorted({claimant.priority for claimant in claimants}, reverse=True)
    for priority in buckets:
        members = [claimant for claimant in claimants if claimant.priority == priority]
        wants = {c.name: c.cap - shares[c.name] for c in members}
        remaining -= _water_fill(remaining, members, shares, wants, Fraction(k_value))
    return shares


def _round_weights(active: Sequence[Claimant], k: Fraction) -> dict[str, Fraction]:
    """This round's weights: the configured ones, or KAI's usage-adjusted ones."""
    if not any(m.usage for m in active):
        return {m.name: Fraction(m.weight) for m in active}
    total = sum(m.weight for m in active)
    weights = {}
    for member in active:
        normalized = Fraction(member.weight, total)
        weights[member.name] = max(Fraction(0), normalized + k * (normalized
                                                                  - Fraction(member.usage)))
    return weights


def _water_fill(amount: int, members: Sequence[Claimant], shares: dict[str, int],
                wants: Mapping[str, int], k: Fraction) -> int:
    """Give up to `wants[name]` to each member in proportion to weights; returns units given."""
    active = [m for m in members if wants[m.name] > 0 and m.weight > 0]
    granted = {m.name: 0 for m in active}
    left = amount
    while left > 0 and active:
        weights = _round_weights(active, k)
        active = [m for m in active if weights[m.name] > 0]
        total_weight = sum(weights[m.name] for m in active)
        if not total_weight:
            break
        ideal = {m.name: left * weights[m.name] / total_weight for m in active}
        saturated = [m for m in active if ideal[m.name] >= wants[m.name] - granted[m.name]]
        if saturated:
            for member in saturated:
                give = wants[member.name] - granted[member.name]
                granted[member.name] += give
                left -= give
            active = [m for m in active if m not in saturated]
            continue
        for member in active:
            whole = int(ideal[member.name])
            granted[member.name] += whole
            left -= whole
        ranked = sorted(active, key=lambda m: (-(ideal[m.name] - int(ideal[m.name])),
                                               -m.weight, m.name))
        for member in ranked[:left]:
            granted[member.name] += 1
        left -= min(left, len(ranked))
        break
    for name, units in granted.items():
        shares[name] += units
    return amount - left


def fair_shares(queues: Sequence[Queue], capacity: Mapping[str, int],
                requested: Mapping[str, Mapping[str, int]], k_value: float = 1.0
                ) -> dict[str, dict[str, int]]:
    """Fair share of every queue per resource.

    `capacity`: resource -> cluster total; `requested`: queue -> resource -> the queue's OWN
    request (leaf queues hold the jobs); a parent's request is summed from its subtree here,
    and so is its usage (GPUs only: the stored usage series is of GPUs).
    """
    children: dict[str | None, list[Queue]] = {}
    for queue in sorted(queues, key=lambda q: q.name):
        children.setdefault(queue.parent, []).append(queue)
    totals = subtree_requests(queues, requested)
    usage = subtree_usage(queues)
    result: dict[str, dict[str, int]] = {queue.name: {} for queue in queues}
    for resource in RESOURCES:
        pending: list[tuple[str | None, int]] = [(None, capacity.get(resource, 0))]
        while pending:
            parent, amount = pending.pop()
            siblings = children.get(parent, [])
            claimants = [Claimant(q.name, q.priority, q.resource(resource).quota,
                                  q.resource(resource).limit,
                                  q.resource(resource).over_quota_weight,
                                  totals[q.name][resource],
                                  usage[q.name] if resource == "gpu" else 0.0)
                         for q in siblings]
            for name, share in split(amount, claimants, k_value).items():
                result[name][resource] = share
                pending.append((name, share))
    return result


def subtree_requests(queues: Sequence[Queue], requested: Mapping[str, Mapping[str, int]]
                     ) -> dict[str, dict[str, int]]:
    """Requests summed up the queue tree (leaf requests as given)."""
    totals = {q.name: {r: 0 for r in RESOURCES} for q in queues}
    parents = {q.name: q.parent for q in queues}
    for queue in queues:
        own = requested.get(queue.name, {})
        for resource in RESOURCES:
            value = own.get(resource, 0)
            if not value:
                continue
            name: str | None = queue.name
            seen: set[str] = set()
            while name is not None and name in totals and name not in seen:
                seen.add(name)
                totals[name][resource] += value
                name = parents[name]
    return totals


def subtree_usage(queues: Sequence[Queue]) -> dict[str, float]:
    """Each queue's usage plus its descendants' (KAI: a department's usage is its queues')."""
    totals = {q.name: 0.0 for q in queues}
    parents = {q.name: q.parent for q in queues}
    for queue in queues:
        if not queue.usage:
            continue
        name: str | None = queue.name
        seen: set[str] = set()
        while name is not None and name in totals and name not in seen:
            seen.add(name)
            totals[name] += queue.usage
            name = parents[name]
    return totals
