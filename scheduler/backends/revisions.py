"""A backend's revisions (the BACKEND config's history, osmo/config_history.py): what a revision
records of a backend, and the one writer of `BackendEvent` rows beside the change."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from osmo import config_history

from ..models import Backend, BackendEvent

FIELDS = ("kind", "placement", "k8s_namespace", "description", "scheduler_name", "maintenance")
# A backend's configuration, as its revisions record it (what the agent reports is not).
CONFIG_FIELDS = ("name", *FIELDS)


def backend_snapshot(backend: Backend) -> dict[str, Any]:
    return {field: getattr(backend, field) for field in CONFIG_FIELDS}


def backend_created(*, backend: Backend, using: str = "default") -> None:
    """The first revision of a backend made outside the API (the `default` row, made again
    after a flush)."""
    with transaction.atomic(using=using):
        backend_audit(name=backend.name, action="backend_created", actor=None, before=None,
                      after=backend_snapshot(backend), using=using)


def backend_audit(*, name: str, action: str, actor, before: dict | None,
                  after: dict | None, using: str = "default") -> BackendEvent:
    """The audit event, which is also the BACKEND config's next revision (taken last: the
    change's row locks are held by now)."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    note = config_history.current_note(f"{action.replace('_', ' ').capitalize()}: {name}")
    return BackendEvent.objects.using(using).create(
        backend_name=name, action=action, actor=user,
        actor_name=user.get_username() if user else None, before=before, after=after,
        revision=config_history.next_revision(BackendEvent, config_history.BACKEND,
                                              using=using),
        description=note.description, tags=list(note.tags))
