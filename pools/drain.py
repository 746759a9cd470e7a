"""Asking for subpool drain checks (seed 002, DELETING → ARCHIVED); `pools.tasks` runs them.

Services call `drain_check_on_commit()` when a subpool goes DELETING, and the workflow
lifecycle calls `drain_check_if_deleting_on_commit()` when a workflow in a subpool ends. Tasks
are sent by name, so the services and the lifecycle that ask for a check do not import the
tasks that call back into the services.
"""

from __future__ import annotations

import logging

from django.db import transaction

from osmo.celery import app

from .models import Pool, SubpoolState

logger = logging.getLogger(__name__)

SUBPOOL_DRAIN_CHECK = "pools.tasks.subpool_drain_check"
DRAIN_CHECK = "pools.tasks.drain_check"


def publish(task_name: str, countdown: float | None = None, **kwargs) -> bool:
    """Queue a task; a broker outage is logged, never raised: the beat sweep re-examines
    every DELETING subpool, so nothing is lost for good."""
    try:
        app.send_task(task_name, kwargs=kwargs, countdown=countdown, retry=False)
    except Exception:  # noqa: BLE001 - any publish failure means "broker unavailable"
        logger.warning("%s not queued: broker unavailable", task_name)
        return False
    return True


def drain_check_on_commit(subpool_id: int | None = None) -> None:
    """Ask for a drain check of one subpool (or, without an id, a sweep of all DELETING ones)
    once the current transaction commits, so the worker sees the committed state.

    Not `delay_on_commit`: a failing on-commit callback would turn an already committed request
    into an error, and a broker outage must not fail the API.
    """
    if subpool_id is None:
        transaction.on_commit(lambda: publish(DRAIN_CHECK))
    else:
        transaction.on_commit(lambda: publish(SUBPOOL_DRAIN_CHECK, subpool_id=subpool_id))


def drain_check_if_deleting_on_commit(subpool_id: int) -> None:
    """After a workflow in a subpool ends: once committed, check the subpool if it is DELETING.
    Read after the commit, not before: a delete that commits meanwhile is seen here, and one
    that commits later runs its own check, which sees this finish — so no drain waits for beat.
    """

    def check() -> None:
        if Pool.objects.filter(pk=subpool_id, subpool_state=SubpoolState.DELETING).exists():
            publish(SUBPOOL_DRAIN_CHECK, subpool_id=subpool_id)

    transaction.on_commit(check)
