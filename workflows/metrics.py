"""Admission metrics (names after Kueue's ``kueue_admission_attempts_total`` and
``kueue_admission_attempt_duration_seconds``): every real submission, workflow or workload,
by its result — ``admitted`` or the refusal's contract code (``exceeds_unallocated``,
``exceeds_quota``, ``invalid_spec``...) — and the pool it went to. Dry runs are not counted.
The pending workflows per pool are read at scrape time (:mod:`workflows.collectors`)."""

from __future__ import annotations

import functools
import time

from prometheus_client import Counter, Histogram

from osmo.errors import OsmoError
from osmo.observability import logs
from osmo.observability.metrics import enabled

ADMISSION_ATTEMPTS = Counter(
    "osmo_admission_attempts_total",
    "Submissions by result (admitted, or the refusal's code), kind (workflow, workload) and "
    "pool.", ["result", "kind", "pool"])
ADMISSION_DURATION = Histogram(
    "osmo_admission_attempt_duration_seconds",
    "Time to admit or refuse a submission, by outcome (admitted, refused, error).",
    ["outcome"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
NOTIFICATIONS = Counter(
    "osmo_notifications_total",
    "Workflow-end notifications by channel (email, slack) and result: sent, failed (one "
    "attempt; retried), gave_up (after the last retry), not_queued (the broker refused), "
    "refused (the webhook's host is not an allowed one).",
    ["channel", "result"])
# Raised only once the target pool was found: its name is then a bounded label, never input.
POOL_KNOWN_CODES = frozenset({"exceeds_unallocated", "exceeds_quota", "subpool_not_active",
                              "pool_not_online", "podgroup_exists"})


def _pool_name(pool) -> str:
    return getattr(pool, "name", None) or (pool if isinstance(pool, str) else "")


def counted(kind: str):
    """Decorates a submit service (keyword ``pool``, optional ``dry_run``; returns an
    Admission): counts and times each real attempt, and binds the pool and the admitted
    workflow to the log lines of the request being served."""

    def decorate(submit):
        @functools.wraps(submit)
        def wrapper(*args, **kwargs):
            if kwargs.get("dry_run") or not enabled():
                return submit(*args, **kwargs)
            started = time.perf_counter()
            result, outcome, pool = "error", "error", ""
            try:
                admission = submit(*args, **kwargs)
            except OsmoError as error:
                result, outcome = error.code, "refused"
                if error.code in POOL_KNOWN_CODES or not isinstance(kwargs.get("pool"), str):
                    pool = _pool_name(kwargs.get("pool"))
                raise
            else:
                result, outcome = "admitted", "admitted"
                pool = admission.workflow.pool.name
                if "request_id" in logs.current():  # the request's own lines; reset after it
                    logs.bind(pool=pool, workflow=admission.workflow.name)
                return admission
            finally:
                ADMISSION_ATTEMPTS.labels(result, kind, pool).inc()
                ADMISSION_DURATION.labels(outcome).observe(time.perf_counter() - started)

        return wrapper

    return decorate
