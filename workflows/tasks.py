"""Background jobs of the workflows app: the log and event store's retention."""

from __future__ import annotations

from celery import shared_task

from . import logstore


@shared_task
def logs_purge() -> dict:
    """Delete the logs and events of workflows ended OSMO_LOG_RETENTION_DAYS ago."""
    chunks, events = logstore.purge()
    return {"log_chunks": chunks, "events": events}
