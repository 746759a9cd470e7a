"""A rollback: the named item of a revision goes back to the config that revision recorded,
through its app's services (so it obeys every rule an update does), as new revisions."""

from __future__ import annotations

from django.db import transaction

from osmo import config_history
from pools.services import pool_revision_restore, pool_revision_tag

from ..backends.services import backend_revision_restore, backend_revision_tag
from . import selectors


@transaction.atomic
def config_rollback(*, actor, config_type: str, revision: int, description: str = "",
                    tags: tuple[str, ...] = ()) -> list[tuple[str, int]]:
    """Returns the (config type, revision) pairs the rollback wrote: none when the item
    already is as it was; more than one when a backend's delete makes pools forget it."""
    event = selectors.revision_get(config_type, revision)
    said = f"Roll back {config_type} to r{revision}"
    note = config_history.Note(description=f"{said}: {description}" if description else said,
                               tags=tuple(tags))
    with config_history.noted(note):
        if config_type == config_history.POOL:
            pool_revision_restore(actor=actor, event=event)
        else:
            backend_revision_restore(actor=actor, event=event)
    return list(note.written)


def config_tag(*, config_type: str, revision: int, add: list[str], remove: list[str]) -> None:
    selectors.revision_get(config_type, revision)  # 404 revision_not_found
    if config_type == config_history.POOL:
        pool_revision_tag(revision=revision, add=add, remove=remove)
    else:
        backend_revision_tag(revision=revision, add=add, remove=remove)
