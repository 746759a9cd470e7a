"""The shapes of a scheduling cycle's record (`cycle_record` writes them to `SchedulerCycle`):
pure values, importable without the database — the backend agent builds them from its own
cycles and sends them to the service."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.core.results import CycleResult, StartEstimate

# The pending gangs a cycle message from the backend agent explains (the first, in the cycle's
# order): a record of thousands stays well within one request.
MAX_CYCLE_PENDING = 2000


@dataclass(frozen=True)
class QueueFigures:
    """A queue's GPU figures after the cycle (KAI's fair share)."""

    name: str
    parent: str | None
    deserved_gpus: int
    fair_share_gpus: int
    allocated_gpus: int
    allocated_non_preemptible_gpus: int
    requested_gpus: int
    reserved_gpus: int = 0  # what its reservations will take (see core/reservation.py)


@dataclass(frozen=True)
class PendingGang:
    """A gang the cycle left pending, and why (`{code, message, ...}` each); `estimate`: its
    reservation's start estimate (`estimate_row`), None without one."""

    podgroup: str
    workflow: str
    group: str
    queue: str
    reasons: list[dict[str, Any]]
    estimate: dict[str, Any] | None = None


def estimate_row(estimate: StartEstimate | None) -> dict[str, Any] | None:
    """`{expected_start_at, reserved_nodes, reserved_gpus, waits_for, untimed}`;
    `expected_start_at` (ISO 8601) is null when work without an exec_timeout is in the way."""
    if estimate is None:
        return None
    at = (None if estimate.at is None else
          datetime.fromtimestamp(estimate.at, tz=UTC).isoformat().replace("+00:00", "Z"))
    return {"expected_start_at": at, "reserved_nodes": list(estimate.nodes),
            "reserved_gpus": estimate.gpus, "waits_for": list(estimate.waits_for),
            "untimed": list(estimate.untimed)}


@dataclass(frozen=True)
class CycleRecord:
    at: datetime
    duration_ms: float
    bound: int = 0
    evicted: int = 0
    queues: tuple[QueueFigures, ...] = ()
    pending_gangs: tuple[PendingGang, ...] = ()
    metrics: dict[str, Any] | None = None  # OSMO_PLACEMENT=osmo: timings and API calls


def queue_figures(result: CycleResult | None) -> tuple[QueueFigures, ...]:
    if result is None:
        return ()
    figures = []
    for status in result.queues:
        gpu = status.figures("gpu")
        figures.append(QueueFigures(
            name=status.name, parent=status.parent, deserved_gpus=gpu.deserved,
            fair_share_gpus=gpu.fair_share, allocated_gpus=gpu.allocated,
            allocated_non_preemptible_gpus=gpu.allocated_non_preemptible,
            requested_gpus=gpu.requested, reserved_gpus=gpu.reserved))
    return tuple(figures)


def waiting_words(reasons: list[dict]) -> tuple[str, str]:
    """(event reason, message) of a pending gang: queued, or unschedulable and why."""
    if not reasons:
        return "Queued", "waiting for its turn in the queue"
    return "Unschedulable", "; ".join(r.get("message") or r.get("code", "") for r in reasons)
