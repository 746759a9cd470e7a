"""Every write an agent causes: register, the messages it sends, the acks of its work.

Messages are de-duplicated by a table keyed by (backend, message id) (``AgentMessage``),
not by per-stream sequence numbers: an agent killed mid-stream starts again with nothing
remembered, and ids it draws at random never collide with those of its earlier lives, while a
sequence would need the agent to keep a counter across restarts (or the service to tell apart
a restarted stream from a replayed one). The row is inserted in the transaction that applies
the message, so a message is applied once or not at all, and acked only then.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from osmo.errors import Conflict, OsmoError
from osmo.observability.metrics import enabled
from scheduler import services as scheduler_services
from scheduler.cycle_figures import CycleRecord, PendingGang, QueueFigures
from scheduler.cycle_record import cycle_record_write
from scheduler.models import (
    AgentMessage,
    AgentWork,
    AgentWorkKind,
    Backend,
    BackendKind,
    ClusterBackendStatus,
    Node,
)
from workflows.selectors import workflows_not_started

from ..fleet import fleet_pass
from ..kubernetes.nodes import node_fields
from ..selectors import backend_get
from . import metrics, work
from .lease import lease_acquire, lease_hold
from .pods import AgentPods

logger = logging.getLogger(__name__)

MESSAGE_TYPES = ("heartbeat", "nodes", "nodes_listed", "pods", "pods_listed", "placement",
                 "pod_logs", "cycle")
KEPT_MESSAGES = timedelta(days=2)  # ids older than any agent's unacked message


def _kubernetes(name: str) -> Backend:
    backend = backend_get(name)
    if backend.kind != BackendKind.KUBERNETES:
        raise OsmoError("invalid_backend", f"Backend '{name}' is {backend.kind}: only a "
                                           f"kubernetes backend is served by an agent.",
                        errors={"name": ["Must be a kubernetes backend."]})
    return backend


@transaction.atomic
def agent_register(*, name: str, k8s_uid: str, version: str,
                   instance: str = "") -> tuple[Backend, datetime]:
    """An agent (re)connects: the first records the cluster's identity, a later one must
    bring the same (409 ``backend_identity_mismatch``, nothing changed), and it must win the
    backend's lease (409 ``agent_not_leader`` while another agent's runs: it stands by,
    nothing changed). Every unacked item of work will be handed out again, and the Queues and
    Topology are queued whole. Returns the backend and when this connection began (the agent
    echoes it with its re-lists)."""
    backend = _kubernetes(name)
    backend = Backend.objects.select_for_update().get(pk=backend.pk)
    if backend.k8s_uid and backend.k8s_uid != k8s_uid:
        raise Conflict("backend_identity_mismatch",
                       f"Backend '{name}' belongs to the cluster whose kube-system namespace "
                       f"has UID {backend.k8s_uid}; this agent's cluster has {k8s_uid[:64]}.")
    now = timezone.now()
    lease_acquire(backend=backend.name, instance=instance, now=now)
    backend.k8s_uid = k8s_uid
    backend.version = version
    backend.last_heartbeat = now
    backend.save(update_fields=["k8s_uid", "version", "last_heartbeat"])
    work.queue_sync(backend, force=True)
    metrics.record_connect(name)
    AgentMessage.objects.filter(backend=name,
                                received_at__lt=now - KEPT_MESSAGES).delete()
    return backend, now


def agent_backend(name: str, instance: str = "") -> Backend:
    """The backend an agent speaks for; it must have registered (its identity known) and
    lead it (its lease renewed now; 409 ``agent_not_leader`` otherwise, nothing changed)."""
    backend = _kubernetes(name)
    if not backend.k8s_uid:
        raise Conflict("backend_not_registered", f"Backend '{name}': register first.")
    lease_hold(backend=name, instance=instance)
    return backend


def _first_time(backend: Backend, message_id: str, kind: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {AgentMessage._meta.db_table} (backend, message_id, type, received_at)"
            " VALUES (%s, %s, %s, now()) ON CONFLICT (backend, message_id) DO NOTHING"
            " RETURNING id", [backend.name, message_id, kind])
        return cursor.fetchone() is not None


def agent_messages(*, backend: Backend, messages: list[dict[str, Any]]) -> list[str]:
    """Apply the messages in their order, each once; returns the ids acked (applied now or
    before). A message whose effect fails is not acked (its row rolls back with it): the
    agent sends it again; the messages after it wait for it."""
    acked: list[str] = []
    applied, resent = Counter(), 0
    pods = AgentPods(backend)
    for message in messages:
        try:
            with transaction.atomic():
                first = _first_time(backend, message["id"], message["type"])
                if first:
                    _apply(backend, pods, message["type"], message["payload"])
        except Exception:
            logger.exception("agent %s: message %s (%s) failed", backend.name, message["id"],
                             message["type"])
            break
        acked.append(message["id"])
        if first:
            applied[message["type"]] += 1
        else:
            resent += 1
    if acked:
        Backend.objects.filter(pk=backend.pk).update(last_heartbeat=timezone.now())
    metrics.record_messages(backend.name, applied, resent)
    return acked


def _apply(backend: Backend, pods: AgentPods, kind: str, payload: dict[str, Any]) -> None:
    if kind == "heartbeat":
        return  # every accepted batch is a heartbeat
    if kind == "nodes":
        _nodes(backend, payload.get("nodes") or [], payload.get("deleted") or [])
    elif kind == "nodes_listed":
        names = list(payload.get("names") or [])
        for node in Node.objects.filter(backend=backend.name).exclude(name__in=names):
            scheduler_services.node_delete(node=node, force=True)
    elif kind == "pod_logs":
        pods.archived(payload)
    elif kind == "placement":
        _placement(backend, payload.get("missing") or [])
    elif kind == "cycle":
        _cycle(backend, payload)
    elif kind == "pods":
        pods.handle_batch([(pod, bool(deleted)) for pod, deleted in payload.get("pods") or []])
    elif kind == "pods_listed":
        keys = {(workflow, task) for workflow, task in payload.get("tasks") or []}
        pods.relisted(keys, int(payload.get("applied_through") or 0),
                      _session(payload.get("session")))


def _placement(backend: Backend, missing: list) -> None:
    """The agent's last word on what the placement lacks on its cluster, kept on the
    backend's health row as the in-process leader keeps its own (``/api/health``)."""
    clean = [{"requirement": str(item.get("requirement", ""))[:32],
              "detail": str(item.get("detail", ""))[:500]}
             for item in missing[:20] if isinstance(item, dict)]
    ClusterBackendStatus.objects.update_or_create(backend=backend.name, defaults={
        "ok": True, "detail": "", "checked_at": timezone.now(), "leader": "agent",
        "placement_missing": clean})


def _cycle(backend: Backend, cycle: dict[str, Any]) -> None:
    """A cycle of our placement in the agent (its shape checked by the serializer), on the
    backend's `SchedulerCycle` row as the backend process records its own."""
    cycle_record_write(CycleRecord(
        at=datetime.fromtimestamp(cycle["at"], tz=UTC), duration_ms=cycle["duration_ms"],
        bound=cycle["bound"], evicted=cycle["evicted"],
        queues=tuple(QueueFigures(**queue) for queue in cycle["queues"]),
        pending_gangs=tuple(PendingGang(**gang) for gang in cycle["pending_gangs"]),
        metrics=cycle["metrics"]), backend=backend.name)
    tally = cycle.get("tally")  # none from an older agent
    if tally is not None and enabled():
        metrics.record_cycles(tally, _first_binds(backend, tally["first_bound"]))


def _first_binds(backend: Backend, names: list[str]) -> list[tuple[str, float]]:
    """(priority, seconds since submission) of the named workflows whose groups this backend
    was given (claimed, not only applied: the bind may come before the acks) and none of whose
    tasks has started, as the in-process backend reads them: one that started was counted."""
    if not names:
        return []
    ours = AgentWork.objects.filter(backend=backend.name, kind=AgentWorkKind.CREATE,
                                    group__workflow__name__in=names)
    found = workflows_not_started(ours.values_list("group__workflow__name", flat=True))
    now = timezone.now()
    return [(priority, (now - submitted_at).total_seconds())
            for priority, submitted_at in found.values()]


def _session(stamp: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None


def _nodes(backend: Backend, nodes: list[dict], deleted: list[str]) -> None:
    """Register or update the reported Nodes in one statement, remove the deleted ones
    (force: their pods are gone with them), as the in-process node mirror does — never
    another backend's node."""
    scheduler_services.nodes_upsert(backend=backend.name,
                                    nodes=[node_fields(item) for item in nodes])
    for row in Node.objects.filter(backend=backend.name, name__in=list(deleted)):
        scheduler_services.node_delete(node=row, force=True)


def agent_poll(*, backend: Backend, acks: list[dict], after: int = 0,
               instance: str = "", arrived: bool = True) -> list[dict]:
    """Record the acks, claim what is new for this backend, and return its unacked work
    after id ``after`` (the agent's last seen in this connection; 0: everything) — while
    ``instance`` still leads: a long poll is not a renewal (the request began it), so a
    poll whose agent died meanwhile does not keep its lease. Nor is a later step of it a
    heartbeat (``arrived``: the request's first step), or a dead agent's poll would keep
    its backend ONLINE until the poll ends."""
    lease_hold(backend=backend.name, instance=instance, renew=False)
    work.ack(backend, acks)
    if arrived:
        Backend.objects.filter(pk=backend.pk).update(last_heartbeat=timezone.now())
    # This backend's share of the waiting gangs, chosen before it claims — and before its
    # Queues are synced, so their share of each pool's quota covers what it claims now
    # (the sync goes ahead of the creates: a gang never meets a Queue that lags it).
    fleet_pass(moves=False)
    work.queue_sync(backend)
    work.claim_groups(backend)
    work.queue_reruns(backend)
    work.queue_cleanups(backend)
    return work.unacked(backend, after=after)
