"""The last scheduling cycle's record (`SchedulerCycle`, a row per backend): one typed record,
one writer.

Three places finish a cycle — the embedded loop (`backends/embedded/cycle.cycle_run`), our scheduler
on Kubernetes (`backends/kubernetes/runner.publish_cycle`) and, with KAI placing pods, the
backend publishing KAI's reasons (`backends/kubernetes/reasons.pending_publish`) — and each
builds a `CycleRecord` and hands it to `cycle_record_write`. `GET /api/scheduler/status` and
`explain` read the row (`scheduler.selectors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.core.results import CycleResult, StartEstimate

from .core.kai_names import DEFAULT_BACKEND
from .models import SchedulerCycle


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


# (at, podgroup → reasons) of the record this process wrote last: the next cycle compares its
# pending gangs' reasons with these (`last_reasons`) without reading the row back.
_last_written: tuple[str, datetime | None, dict[str, list[dict[str, Any]]]] = ("", None, {})


def cycle_record_write(record: CycleRecord, *, backend: str = DEFAULT_BACKEND) -> None:
    """Replace ``backend``'s row with ``record`` (its metrics kept when the record has none). The
    records' fields are JSON values already: copied shallowly (`asdict` would copy every
    reason of every pending gang again, each cycle). An UPDATE, not `update_or_create`, which
    would read the whole row (megabytes with thousands of pending gangs) before writing it."""
    global _last_written
    row = {"at": record.at, "duration_ms": record.duration_ms, "bound": record.bound,
           "evicted": record.evicted, "pending": len(record.pending_gangs),
           "queues": [vars(queue).copy() for queue in record.queues],
           "pending_gangs": [vars(gang).copy() for gang in record.pending_gangs]}
    if record.metrics is not None:
        row["metrics"] = record.metrics
    if not SchedulerCycle.objects.filter(backend=backend).update(**row):
        SchedulerCycle.objects.update_or_create(backend=backend, defaults=row)  # the first one
    _last_written = (backend, record.at,
                     {gang.podgroup: gang.reasons for gang in record.pending_gangs})


def last_reasons(backend: str = DEFAULT_BACKEND) -> dict[str, list[dict[str, Any]]]:
    """podgroup → reasons of the pending gangs in ``backend``'s stored record: from memory
    when this process wrote it (its `at` tells), else read from the row."""
    written_for, at, reasons = _last_written
    rows = SchedulerCycle.objects.filter(backend=backend)
    if written_for == backend and at is not None and rows.filter(at=at).exists():
        return reasons
    stored = rows.values_list("pending_gangs", flat=True).first()
    return {gang["podgroup"]: gang["reasons"] for gang in stored or []}


def waiting_words(reasons: list[dict]) -> tuple[str, str]:
    """(event reason, message) of a pending gang: queued, or unschedulable and why."""
    if not reasons:
        return "Queued", "waiting for its turn in the queue"
    return "Unschedulable", "; ".join(r.get("message") or r.get("code", "") for r in reasons)
