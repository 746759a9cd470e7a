"""Background jobs for pools: the subpool drain monitor (seed 002, DELETING → ARCHIVED).

Two tasks, both thin and idempotent: they call `subpool_archive_if_drained`, whose state
predicate and conditional update make repeated or concurrent runs archive a subpool (and write
its audit event) exactly once.

- `subpool_drain_check(subpool_id)`: one subpool; retried shortly when its row was held by
  another transaction (skip_locked) although it looked drained.
- `drain_check(after_id=0)`: a sweep over every DELETING subpool, one bounded batch per run,
  re-enqueued until done. Beat runs it every `OSMO_DRAIN_CHECK_INTERVAL` seconds: the safety net
  for any dispatch lost to a broker outage or a race.

`pools.drain` queues them: when a subpool goes DELETING and when a workflow in a DELETING
subpool ends.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from . import ports, services
from .drain import DRAIN_CHECK, SUBPOOL_DRAIN_CHECK, publish
from .models import Pool, SubpoolState

logger = logging.getLogger(__name__)

DRAIN_BATCH = 100
# A drained subpool whose row another transaction held (skip_locked) is looked at again soon.
CONTENDED_RETRY_SECONDS = 2

# Only database trouble is worth retrying; a bug would fail the same way every time.
_RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": True,
          "retry_backoff_max": 300, "retry_jitter": True, "max_retries": 5,
          "acks_late": True, "ignore_result": True}


def _archive(subpool_ids: list[int]) -> tuple[int, list[int]]:
    """Archive the drained ones; return (archived count, ids that look drained but were skipped
    because another transaction held their row)."""
    archived = sum(services.subpool_archive_if_drained(subpool_id=pk) for pk in subpool_ids)
    if archived == len(subpool_ids):
        return archived, []
    deleting = list(Pool.objects.filter(pk__in=subpool_ids, subpool_state=SubpoolState.DELETING)
                    .order_by("pk").values_list("pk", flat=True))
    alive = ports.workflows().pools_with_alive(deleting) if deleting else set()
    return archived, [pk for pk in deleting if pk not in alive]


@shared_task(bind=True, **_RETRY)
def subpool_drain_check(self, subpool_id: int) -> int:
    """Archive this subpool if it is DELETING and drained."""
    archived, contended = _archive([subpool_id])
    if contended:
        if self.request.retries >= self.max_retries:
            logger.info("subpool %s still contended; left to the periodic drain check",
                        subpool_id)
            return archived
        raise self.retry(countdown=CONTENDED_RETRY_SECONDS)
    return archived


@shared_task(bind=True, **_RETRY)
def drain_check(self, after_id: int = 0) -> int:
    """Archive the drained DELETING subpools among the next batch (ids above `after_id`)."""
    ids = list(
        Pool.objects.filter(subpool_state=SubpoolState.DELETING, pk__gt=after_id)
        .order_by("pk").values_list("pk", flat=True)[:DRAIN_BATCH]
    )
    archived, contended = _archive(ids)
    for pk in contended:
        publish(SUBPOOL_DRAIN_CHECK, countdown=CONTENDED_RETRY_SECONDS, subpool_id=pk)
    if len(ids) == DRAIN_BATCH:  # maybe more: the next batch runs as its own bounded task
        publish(DRAIN_CHECK, after_id=ids[-1])
    return archived


@shared_task(**_RETRY)
def usage_sample() -> int:
    """A point of every pool's usage chart (beat, every `OSMO_USAGE_SAMPLE_INTERVAL` s)."""
    return services.usage_samples_record(now=timezone.now(),
                                         retention_hours=settings.OSMO_USAGE_RETENTION_HOURS)
