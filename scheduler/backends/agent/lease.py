"""Which of a backend's agents leads: decided here, by the service, on the ``AgentLease`` row.

Agents share nothing but the service, so the service holds the lease (rather than a
``coordination.k8s.io`` Lease on the API server: that would decide who may touch the cluster,
not whose reports and acks the service takes — a deposed agent could still ack and report,
and the service would have to ask the cluster). Each agent process names an instance; its
register takes the lease when nobody holds it, it holds it already, or the holder's lease
ended (``renewed_at`` older than ``OSMO_AGENT_LEASE``). Every accepted request of the holder
renews it; a request of anyone else — a standby, a deposed leader, the holder whose lease
ended — is refused, 409 ``agent_not_leader``, before it changes anything. Each check is one
conditional UPDATE, so two agents never both win one (no check-then-act).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from osmo.errors import Conflict
from scheduler.models import AgentLease

NOT_LEADER = "agent_not_leader"


def lease_seconds() -> int:
    return settings.OSMO_AGENT_LEASE


def _fresh_since(now: datetime) -> datetime:
    return now - timedelta(seconds=lease_seconds())


def _not_leader(backend: str, instance: str, lease: AgentLease | None) -> Conflict:
    if lease is not None and lease.holder == instance:
        detail = (f"This agent's lease of backend '{backend}' ended at "
                  f"{(lease.renewed_at + timedelta(seconds=lease_seconds())).isoformat()}: "
                  f"register again to lead.")
    elif lease is not None:
        detail = (f"Another agent leads backend '{backend}' (its lease ends "
                  f"{lease_seconds()} s after its last request): this one stands by and "
                  f"registers again to take over.")
    else:
        detail = f"No agent leads backend '{backend}': register to lead."
    return Conflict(NOT_LEADER, detail, errors={"instance": ["Not the backend's leader."]})


def lease_acquire(*, backend: str, instance: str, now: datetime) -> AgentLease:
    """At a register, under the backend's row lock: take (or keep) the lease, or raise 409
    ``agent_not_leader`` while another holder's lease runs."""
    mine = Q(holder=instance)
    taken = AgentLease.objects.filter(backend=backend).filter(
        mine | Q(renewed_at__lt=_fresh_since(now))).update(
        holder=instance, renewed_at=now,
        acquired_at=Case(When(mine, then=F("acquired_at")), default=Value(now)),
        transitions=F("transitions") + Case(When(mine, then=Value(0)), default=Value(1)))
    if taken:
        return AgentLease.objects.get(backend=backend)
    lease = AgentLease.objects.filter(backend=backend).first()
    if lease is not None:
        raise _not_leader(backend, instance, lease)
    # The backend's row lock (agent_register) keeps a second first register out.
    return AgentLease.objects.create(backend=backend, holder=instance, acquired_at=now,
                                     renewed_at=now)


def lease_hold(*, backend: str, instance: str, renew: bool = True) -> None:
    """The caller must hold a running lease (renewed now when ``renew``), else 409
    ``agent_not_leader``: only a register takes a lease, so an agent whose lease ended
    re-lists before it is heard again."""
    now = timezone.now()
    held = AgentLease.objects.filter(backend=backend, holder=instance,
                                     renewed_at__gte=_fresh_since(now))
    if (held.update(renewed_at=now) if renew else held.exists()):
        return
    raise _not_leader(backend, instance, AgentLease.objects.filter(backend=backend).first())
