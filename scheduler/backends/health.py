"""Each backend's health for `GET /api/health` (`osmo.ports.backends`): its derived status,
whether it is reachable, and the seconds since its last heartbeat. A backend OFFLINE does not
make the service unhealthy: the service still admits and queues work for it."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from ..models import BackendKind, ClusterBackendStatus
from .liveness import OFFLINE, ONLINE, backend_status, is_online
from .selectors import backends_live
from .spec import spec_of


def heartbeat_age(last_heartbeat: datetime | None, now: datetime) -> float | None:
    """Seconds since the last heartbeat (None without one: an embedded backend needs none)."""
    if last_heartbeat is None:
        return None
    return round(max((now - last_heartbeat).total_seconds(), 0.0), 1)


def placement_readiness(kind: str, missing: list | None) -> dict:
    """{ok, missing}: whether the backend's cluster has what its placement needs (KAI: its
    CRDs, the PriorityClasses, a scheduler that acts), as its leader or agent last reported;
    ``ok`` null when none has reported yet. An embedded backend needs nothing."""
    if kind == BackendKind.EMBEDDED:
        return {"ok": True, "missing": []}
    if missing is None:
        return {"ok": None, "missing": []}
    return {"ok": not missing, "missing": list(missing)}


def backends_health(now: datetime | None = None) -> dict[str, dict]:
    """Backend name → {status, online, heartbeat_age, placement}, by name."""
    now = now or timezone.now()
    lease = settings.OSMO_BACKEND_LEASE
    reported = dict(ClusterBackendStatus.objects.values_list("backend", "placement_missing"))
    return {backend.name: {
        "status": backend_status(kind=backend.kind, maintenance=backend.maintenance,
                                 last_heartbeat=backend.last_heartbeat, now=now,
                                 lease_seconds=lease),
        "online": is_online(kind=backend.kind, last_heartbeat=backend.last_heartbeat, now=now,
                            lease_seconds=lease),
        "heartbeat_age": heartbeat_age(backend.last_heartbeat, now),
        "placement": placement_readiness(spec_of(backend).kind, reported.get(backend.name)),
    } for backend in backends_live()}


def backends_unavailable(pool) -> dict | None:
    """The reason a pool's work waits whatever its quota: none of the backends it names (a
    subpool: its parent's) can take work now. None while one can."""
    names = list((pool.parent if pool.parent_id else pool).backends or [])
    health = backends_health()
    if any(health.get(name, {}).get("status") == ONLINE for name in names):
        return None
    states = []
    for name in names:
        entry = health.get(name)
        if entry is None:
            states.append(f"{name} does not exist")
        elif entry["status"] == OFFLINE and entry["heartbeat_age"] is not None:
            states.append(f"{name} is OFFLINE (no heartbeat for {entry['heartbeat_age']:.0f} s)")
        elif entry["status"] == OFFLINE:
            states.append(f"{name} is OFFLINE (its agent never connected)")
        else:
            states.append(f"{name} is {entry['status']}")
    return {"code": "backends_unavailable",
            "message": f"No backend of pool {pool.name} can take work now: "
                       f"{'; '.join(states) or 'it names none'}. The workflow stays admitted "
                       "and starts once one is back."}
