"""The last scheduling cycle's record (`SchedulerCycle`, a row per backend): one typed record,
one writer.

Three places finish a cycle — the embedded loop (`backends/embedded/cycle.cycle_run`), our scheduler
on Kubernetes (`backends/kubernetes/runner.publish_cycle`) and, with KAI placing pods, the
backend publishing KAI's reasons (`backends/kubernetes/reasons.pending_publish`) — and each
builds a `CycleRecord` and hands it to `cycle_record_write`. `GET /api/scheduler/status` and
`explain` read the row (`scheduler.selectors`). The record's shapes are in `cycle_figures`,
which imports no model (the backend agent builds records too).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .core.kai_names import DEFAULT_BACKEND
from .cycle_figures import CycleRecord
from .models import SchedulerCycle

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
