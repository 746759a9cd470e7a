"""The per-user bound of long responses (followed logs), counted in the database so that it
holds across web processes: a stream takes a lease row, renews it while it lasts and deletes it
when it ends. Rows not renewed for ``STALE_SECONDS`` (their process was killed) count no more.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from .models import StreamLease

# A stream renews its lease every RENEW_SECONDS while it is read (its reader polls each
# second); a lease not renewed for STALE_SECONDS is a dead process's.
RENEW_SECONDS = 10
STALE_SECONDS = 60


def lease_take(*, user_id: int, bound: int) -> int | None:
    """A new lease of ``user_id``'s, or None when they hold ``bound`` live ones already."""
    now = timezone.now()
    with transaction.atomic():
        # The user's row, locked: two processes counting the same user's leases take turns.
        get_user_model().objects.select_for_update().filter(pk=user_id).values("pk").first()
        leases = StreamLease.objects.filter(user_id=user_id)
        leases.filter(renewed_at__lt=now - timedelta(seconds=STALE_SECONDS)).delete()
        if leases.count() >= bound:
            return None
        return StreamLease.objects.create(user_id=user_id, renewed_at=now).pk


def lease_renew(lease_id: int) -> None:
    StreamLease.objects.filter(pk=lease_id).update(renewed_at=timezone.now())


def lease_release(lease_id: int) -> None:
    StreamLease.objects.filter(pk=lease_id).delete()
