"""Background jobs for the KAI objects: keep the cluster's Queues in step with the pool tree.

``queue_sync_on_commit()`` is what pool services call after a change; it does nothing unless a
cluster is configured (``OSMO_KAI_SYNC``), and a broker outage never fails the caller: the
task is a full reconcile (idempotent), so the next successful run catches up with every
change it missed, and a periodic run (beat) can be scheduled as a safety net.
"""

from __future__ import annotations

import logging

import urllib3.exceptions
from celery import shared_task
from django.db import transaction

from scheduler.backends.fleet import fleet_pass
from scheduler.backends.lost import backends_lost_pass
from scheduler.backends.spec import default_spec
from scheduler.kai.sync import KaiSyncError, sync_enabled, sync_namespace

logger = logging.getLogger(__name__)


RETRYABLE = (KaiSyncError, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


@shared_task(acks_late=True, autoretry_for=RETRYABLE, retry_backoff=True,
             retry_backoff_max=300, retry_jitter=True, max_retries=6)
def kai_queue_sync(namespace: str | None = None) -> dict:
    """Reconcile the namespace's Queues and Topology; returns the summary (JSON)."""
    if not sync_enabled():
        return {"skipped": True}
    summary = sync_namespace(namespace=namespace or default_spec().namespace)
    if summary.changed:
        logger.info("kai queue sync: %s", summary.counts())
    return summary.as_dict()


def queue_sync_on_commit(namespace: str | None = None) -> None:
    """Ask for a queue sync once the current transaction commits (no-op without a cluster)."""
    if not sync_enabled():
        return

    def dispatch() -> None:
        try:
            kai_queue_sync.apply_async(kwargs={"namespace": namespace}, retry=False)
        except Exception:  # noqa: BLE001 - the next sync (or the beat run) reconciles anyway
            logger.warning("kai queue sync not queued: broker unavailable")

    transaction.on_commit(dispatch)


@shared_task
def backends_lost() -> dict:
    """The started groups of lost backends end FAILED_BACKEND_ERROR (`backends/lost.py`);
    the not-started ones of OFFLINE backends are chosen again (`backends/fleet.py`), also
    when no other process runs a pass."""
    fleet_pass()
    return backends_lost_pass()
