"""The workflows whose first pod a cycle of our placement bound, from its result and index
alone: the backend process then reads their priority and submission time from the database
(:func:`.runner.first_binds`), the backend agent sends their names to the service, which does
(``osmo_scheduler_time_to_first_bind_seconds``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.core.kai_names import WORKFLOW_NAME_ANNOTATION

if TYPE_CHECKING:
    from .placement import Placement

FIRST_BINDS_REMEMBERED = 10_000


def first_bound(placement: Placement, seen: dict[str, None]) -> list[str]:
    """The workflows of the gangs the last cycle bound that had no pod bound before, but those
    in ``seen`` (counted already by this process, whose start the database may not show yet)."""
    result, index = placement.last_result, placement.last_index
    if result is None or index is None:
        return []
    names: dict[str, None] = {}
    for gang_name in {binding.gang for binding in result.bindings}:
        gang, podgroup = index.gangs.get(gang_name), index.podgroups.get(gang_name)
        if gang is None or podgroup is None or any(pod.node for pod in gang.pods):
            continue
        name = (podgroup["metadata"].get("annotations") or {}).get(WORKFLOW_NAME_ANNOTATION)
        if name and name not in seen:
            names[name] = None
    return list(names)


def remember(seen: dict[str, None], names: list[str]) -> None:
    """``names`` counted: ``seen`` keeps the latest ``FIRST_BINDS_REMEMBERED``."""
    for name in names:
        seen[name] = None
    while len(seen) > FIRST_BINDS_REMEMBERED:
        del seen[next(iter(seen))]
