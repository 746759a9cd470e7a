"""Quota arithmetic of seed 002, pure (no Django) so it can be property-tested.

- A subpool's effective quota is its configured quota while ACTIVE, 0 while DELETING or ARCHIVED
  (its guarantee returns to the parent at once; its running work drains).
- unallocated = parent quota − Σ effective quotas of ACTIVE subpools.
- available = quota − HIGH/NORMAL usage; it may be negative (GPUs to drain).
- Whole GPUs only: any fractional figure is floored, the remainder stays with the parent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

ACTIVE, DELETING, ARCHIVED = "ACTIVE", "DELETING", "ARCHIVED"


def whole_gpus(value: float | int) -> int:
    """Floor to whole GPUs (seed 002: rounding is floor)."""
    return math.floor(value)


def effective_quota(state: str, configured_quota: float | int) -> int:
    return whole_gpus(configured_quota) if state == ACTIVE else 0


def allocated_to_subpools(subpools: Iterable[tuple[str, float | int]]) -> int:
    """Σ effective quotas over `(state, configured_quota)` pairs."""
    return sum(effective_quota(state, quota) for state, quota in subpools)


def unallocated(parent_quota: float | int, subpools: Iterable[tuple[str, float | int]] = (),
                *, allocated: int = 0) -> int:
    """A parent's unallocated GPUs: its quota less what its ACTIVE subpools hold, given as
    `(state, configured_quota)` pairs or, where the database already summed them, as
    `allocated`. Every figure of a parent's own share comes from here."""
    return whole_gpus(parent_quota) - allocated - allocated_to_subpools(subpools)


def available(quota: float | int, used_high_normal: float | int) -> int:
    """May be negative: a soft decrease or a delete leaves running work in place."""
    return whole_gpus(quota) - whole_gpus(used_high_normal)


def fits_in_parent(parent_quota: int, other_active_quotas: int, new_quota: int) -> bool:
    """Σ ACTIVE subpool quotas (others + this one) must stay within the parent quota."""
    return new_quota <= unallocated(parent_quota, allocated=other_active_quotas)


@dataclass(frozen=True)
class Usage:
    used_gpus: int = 0  # HIGH + NORMAL
    total_usage_gpus: int = 0  # all priorities, LOW included
    running_workflows: int = 0  # workflows holding any of these GPUs
