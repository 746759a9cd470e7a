"""Background jobs of the workflows app: the log and event store's retention, the
notifications of ended workflows."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from . import logstore, notifications
from .metrics import NOTIFICATIONS

log = logging.getLogger("osmo.notifications")


@shared_task
def logs_purge() -> dict:
    """Delete the logs and events of workflows ended OSMO_LOG_RETENTION_DAYS ago."""
    chunks, events = logstore.purge()
    return {"log_chunks": chunks, "events": events}


@shared_task(bind=True, acks_late=True, max_retries=None)
def workflow_notify(self, workflow_id: int, channel: str) -> bool:
    """Send a workflow's end to its user on ``channel`` (email, slack); a failed attempt is
    retried OSMO_NOTIFY_RETRIES times, OSMO_NOTIFY_BACKOFF seconds doubled each time."""
    try:
        return notifications.deliver(workflow_id, channel)
    except notifications.DeliveryError as exc:
        if self.request.retries < settings.OSMO_NOTIFY_RETRIES:
            log.warning("notifications: %s; retry %d", exc, self.request.retries + 1)
            raise self.retry(countdown=settings.OSMO_NOTIFY_BACKOFF * 2 ** self.request.retries
                             ) from None
        NOTIFICATIONS.labels(channel, "gave_up").inc()
        log.error("notifications: %s; given up after %d retries", exc, self.request.retries)
        return False
