"""Every write to the backends: create or update, maintenance, delete (API.md "Backends").

A backend's name is its identity: pools and nodes refer to it by name, so a name is never
renamed, and a delete is refused while a pool names the backend or tasks are bound on its
nodes, unless forced.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from osmo import config_history
from osmo.errors import Conflict, OsmoError
from pools.selectors import pools_naming_backends
from pools.services import pools_forget_backend
from scheduler.core.kai_names import DNS_LABEL_PATTERN
from workflows import lifecycle
from workflows.selectors import bound_tasks_on_nodes

from ..models import Backend, BackendEvent, BackendPlacement, Node
from ..services import node_delete
from .default import backend_names_missing  # noqa: F401 - the port's provider
from .revisions import FIELDS as _FIELDS
from .revisions import backend_audit, backend_snapshot

_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
def _invalid(field: str, message: str) -> OsmoError:
    return OsmoError("invalid_backend", message, errors={field: [message]})


def validate_name(name: str) -> str:
    if not _DNS_LABEL.match(name):
        raise _invalid("name", f"'{name[:80]}' is not a valid backend name: a DNS label (1-63 "
                               f"lowercase letters, digits and '-', alphanumeric at both ends).")
    return name


def default_scheduler_name(placement: str) -> str:
    return "osmo-scheduler" if placement == BackendPlacement.OSMO else "kai-scheduler"


@transaction.atomic
def backend_upsert(*, name: str, actor=None, **changes: Any) -> tuple[Backend, bool]:
    """Create or update a backend. Returns (backend, created). `changes` are validated fields
    (kind, placement, k8s_namespace, description, scheduler_name, maintenance); absent ones
    keep their value, an empty scheduler_name is the placement's. Creating takes a `kind`."""
    validate_name(name)
    backend = Backend.objects.select_for_update().filter(name=name).first()
    if backend is None:
        if "kind" not in changes:
            raise _invalid("kind", "A new backend needs a kind: embedded or kubernetes.")
        fields = {"placement": BackendPlacement.KAI, **changes}
        fields["scheduler_name"] = (fields.get("scheduler_name")
                                    or default_scheduler_name(fields["placement"]))
        try:
            with transaction.atomic():
                backend = Backend.objects.create(name=name, **fields)
        except IntegrityError:
            # A concurrent creator won: this request updates its row.
            backend = Backend.objects.select_for_update().get(name=name)
        else:
            backend_audit(name=name, action="backend_created", actor=actor, before=None,
                          after=backend_snapshot(backend))
            return backend, True
    if changes.get("scheduler_name") == "":  # cleared: the scheduler of its placement
        changes["scheduler_name"] = default_scheduler_name(changes.get("placement",
                                                                       backend.placement))
    before = backend_snapshot(backend)
    changed = [f for f in _FIELDS if f in changes and getattr(backend, f) != changes[f]]
    for field in changed:
        setattr(backend, field, changes[field])
    if changed:
        backend.save(update_fields=changed)
        backend_audit(name=name, action="backend_updated", actor=actor, before=before,
                      after=backend_snapshot(backend))
    return backend, False


@transaction.atomic
def backend_set_maintenance(*, backend: Backend, maintenance: bool, actor=None) -> Backend:
    backend = Backend.objects.select_for_update().get(pk=backend.pk)
    if backend.maintenance != maintenance:
        before = backend_snapshot(backend)
        backend.maintenance = maintenance
        backend.save(update_fields=["maintenance"])
        backend_audit(name=backend.name, action="backend_maintenance_set" if maintenance
                      else "backend_maintenance_lifted", actor=actor, before=before,
                      after=backend_snapshot(backend))
    return backend


@transaction.atomic
def backend_delete(*, actor, backend: Backend, force: bool = False) -> None:
    """Delete a backend: 409 `backend_in_use` while a live pool names it or tasks are bound on
    its nodes, unless `force` — then the pools forget its name, the groups that started there
    end FAILED_BACKEND_ERROR (reason `backend_deleted`) and its nodes are removed."""
    backend = Backend.objects.select_for_update().get(pk=backend.pk)
    pools = pools_naming_backends([backend.name]).get(backend.name, [])
    nodes = list(Node.objects.filter(backend=backend.name))
    bound = bound_tasks_on_nodes([node.name for node in nodes]).count() if nodes else 0
    if (pools or bound) and not force:
        parts = ([f"pools name it ({', '.join(pools)})"] if pools else []) + (
            [f"{bound} task(s) are bound on its nodes"] if bound else [])
        raise Conflict("backend_in_use", f"Backend '{backend.name}' is in use: "
                                         f"{' and '.join(parts)}; delete with ?force=true.")
    pools_forget_backend(actor=actor, backend=backend.name)
    lifecycle.groups_end_backend_lost(backend=backend.name, reason="backend_deleted",
                                      now=timezone.now())
    for node in nodes:
        node_delete(node=node, force=True)
    before = backend_snapshot(backend)
    backend.delete()
    backend_audit(name=before["name"], action="backend_deleted", actor=actor, before=before,
                  after=None)


@transaction.atomic
def backend_revision_restore(*, actor, event: BackendEvent) -> Backend | None:
    """Roll one backend back to the config its revision recorded, through the services: a
    revision that deleted it deletes it again (refused while in use, as any delete is)."""
    if event.after is None:
        backend = Backend.objects.filter(name=event.backend_name).first()
        if backend is not None:
            backend_delete(actor=actor, backend=backend)
        return None
    fields = {field: event.after[field] for field in _FIELDS if field in event.after}
    return backend_upsert(actor=actor, name=event.backend_name, **fields)[0]


@transaction.atomic
def backend_revision_tag(*, revision: int, add: list[str], remove: list[str]) -> BackendEvent:
    """Tags added to and taken from a BACKEND revision (OSMO's `config tag`)."""
    event = BackendEvent.objects.select_for_update().get(revision=revision)
    event.tags = config_history.retagged(event.tags, add=add, remove=remove)
    event.save(update_fields=["tags"])
    return event
