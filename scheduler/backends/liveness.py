"""A backend's status, derived from its row (pure: no Django). An embedded backend is always
online; a kubernetes one while its agent's heartbeats arrive within the lease; a backend under
maintenance says so whatever its heartbeats."""

from __future__ import annotations

from datetime import datetime, timedelta

ONLINE = "ONLINE"
OFFLINE = "OFFLINE"
MAINTENANCE = "MAINTENANCE"
EMBEDDED = "embedded"


def backend_status(*, kind: str, maintenance: bool, last_heartbeat: datetime | None,
                   now: datetime, lease_seconds: float) -> str:
    if maintenance:
        return MAINTENANCE
    if kind == EMBEDDED:
        return ONLINE
    if last_heartbeat is not None and now - last_heartbeat <= timedelta(seconds=lease_seconds):
        return ONLINE
    return OFFLINE


def is_online(*, kind: str, last_heartbeat: datetime | None, now: datetime,
              lease_seconds: float) -> bool:
    """Reachable, maintenance aside (`online` of the Backend shape)."""
    return backend_status(kind=kind, maintenance=False, last_heartbeat=last_heartbeat, now=now,
                          lease_seconds=lease_seconds) == ONLINE
