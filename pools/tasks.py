"""Background jobs for pools: the subpool drain monitor (seed 002, DELETING → ARCHIVED)."""

from __future__ import annotations

from celery import shared_task
from django.db import transaction

from .models import Pool, SubpoolState

DRAIN_BATCH = 100


@shared_task(acks_late=True, autoretry_for=(Exception,), retry_backoff=True,
             retry_backoff_max=300, max_retries=5)
def drain_check() -> int:
    """Archive every drained DELETING subpool, a bounded batch at a time; idempotent."""
    from .services import subpool_archive_if_drained

    archived = 0
    last_id = 0
    while True:
        ids = list(
            Pool.objects.filter(subpool_state=SubpoolState.DELETING, pk__gt=last_id)
            .order_by("pk").values_list("pk", flat=True)[:DRAIN_BATCH]
        )
        if not ids:
            return archived
        for pk in ids:
            archived += subpool_archive_if_drained(subpool_id=pk)
        last_id = ids[-1]


def drain_check_on_commit() -> None:
    """Ask for a drain check once the current transaction commits. A broker outage must not
    fail the request: the periodic check re-examines every DELETING subpool anyway."""

    def dispatch() -> None:
        try:
            drain_check.apply_async(retry=False)
        except Exception:  # noqa: BLE001 - the beat schedule is the safety net
            import logging

            logging.getLogger(__name__).warning("drain check not queued: broker unavailable")

    transaction.on_commit(dispatch)
