"""What the agents' traffic looks like, per backend: messages applied by type (and those sent
again, already applied), (re)connections, and the dispatch lag through the agent. Counted in
the web process that served the call, after its transaction commits (multiprocess mode sums
the web workers; docs/OBSERVABILITY.md)."""

from __future__ import annotations

from collections import Counter as Tally

from django.db import transaction
from prometheus_client import Counter, Histogram

from osmo.observability.metrics import enabled
from scheduler import metrics as scheduler_metrics

from ..kubernetes.metrics import DISPATCH_LAG_BUCKETS

MESSAGES = Counter("osmo_agent_messages_total",
                   "Messages from a backend's agent applied, by backend and type.",
                   ["backend", "type"])
RESENT = Counter("osmo_agent_messages_resent_total",
                 "Messages an agent sent again that were applied before (acked, not applied "
                 "twice), by backend.", ["backend"])
CONNECTS = Counter("osmo_agent_connects_total",
                   "Agent connections (a register: every agent start and every return after "
                   "the service was unreachable), by backend.", ["backend"])
LAG = Histogram("osmo_agent_dispatch_lag_seconds",
                "Time from a workflow's submission to its group's objects all applied by the "
                "backend's agent, by backend.", ["backend"], buckets=DISPATCH_LAG_BUCKETS)


def _after_commit(record) -> None:
    if enabled():
        transaction.on_commit(record)


def record_messages(backend: str, applied: Tally, resent: int) -> None:
    def record() -> None:
        for kind, count in applied.items():
            MESSAGES.labels(backend, kind).inc(count)
        if resent:
            RESENT.labels(backend).inc(resent)
    _after_commit(record)


def record_connect(backend: str) -> None:
    _after_commit(lambda: CONNECTS.labels(backend).inc())


def record_dispatched(backend: str, lags: list[float]) -> None:
    def record() -> None:
        for seconds in lags:
            LAG.labels(backend).observe(max(0.0, seconds))
    _after_commit(record)


def record_cycles(tally: dict, first_binds: list[tuple[str, float]]) -> None:
    """The scheduler's series (unlabeled, as the in-process backend's) for the agent's cycles
    since its last acked one (``scheduler/cycle_tally.py``)."""
    _after_commit(lambda: scheduler_metrics.record_cycles(
        cycles=tally["cycles"], phases=tally["phases"], bound=tally["bound"],
        evicted=tally["evicted"], moved={"consolidated": tally["moved"]},
        first_binds=first_binds))
