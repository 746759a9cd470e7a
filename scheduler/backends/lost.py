"""A lost cluster: a kubernetes backend whose heartbeats stopped longer ago than its lease plus
`OSMO_BACKEND_LOST_TIMEOUT` (API.md "Backends"). The groups that started there end
FAILED_BACKEND_ERROR, so their workflows settle and their quota is free again, instead of
waiting on a cluster that may never return. Run by Celery beat (`scheduler.tasks.backends_lost`)
every `OSMO_BACKEND_LOST_CHECK_INTERVAL` seconds; idempotent, so a missed run costs time only.

A backend that never sent a heartbeat has nothing dispatched, and an embedded one is never
lost. When the cluster comes back, its pods of ended groups are deleted as any ended group's.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from workflows import lifecycle

from ..models import BackendKind
from .selectors import backends_live

logger = logging.getLogger(__name__)
LOST = "backend_lost"


def lost_since(last_heartbeat: datetime | None) -> datetime | None:
    """When a backend with this last heartbeat counts as lost (None: never, it sent none)."""
    if last_heartbeat is None:
        return None
    return last_heartbeat + timedelta(seconds=settings.OSMO_BACKEND_LEASE
                                      + settings.OSMO_BACKEND_LOST_TIMEOUT)


def backends_lost_pass(now: datetime | None = None) -> dict[str, int]:
    """End the started groups of every lost backend: `{backend: groups ended}` (only those
    that ended some)."""
    now = now or timezone.now()
    ended = {}
    for backend in backends_live():
        due = lost_since(backend.last_heartbeat)
        if backend.kind != BackendKind.KUBERNETES or due is None or now < due:
            continue
        count = lifecycle.groups_end_backend_lost(backend=backend.name, reason=LOST, now=now,
                                                  may_rerun=True)
        if count:
            logger.warning("backend %s lost (no heartbeat since %s): %d started group(s) "
                           "ended FAILED_BACKEND_ERROR, or run again as their exit actions ask",
                           backend.name,
                           backend.last_heartbeat.isoformat(), count)
            ended[backend.name] = count
    return ended
