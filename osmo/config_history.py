"""What every config revision shares, whichever app owns the config (OSMO's config history).

A revision is one change of one named item (a pool, a subpool, a backend): its app writes it in
the change's transaction, beside the change. Revisions are numbered per config type, 1, 2, 3 …
without gaps, in the order they commit: the next number is taken under a transaction-scoped
advisory lock per type, so two writers never share a number and a rolled-back change leaves no
hole. Services take that lock last, after every row lock of their change, so it cannot close a
cycle with them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from osmo.errors import OsmoError

POOL = "POOL"
BACKEND = "BACKEND"
CONFIG_TYPES = (BACKEND, POOL)
# OSMO's other config types: a filter may name them (its client lists every type); no
# revision is kept of them here.
OSMO_CONFIG_TYPES = ("BACKEND_TEST", "DATASET", "GROUP_TEMPLATE", "POD_TEMPLATE",
                     "RESOURCE_VALIDATION", "ROLE", "SERVICE", "WORKFLOW")

REVISION_LOCK = 0x05_0012  # advisory lock class: one key per config type
_LOCK_KEYS = {POOL: 1, BACKEND: 2}

DESCRIPTION_MAX = 1000
TAG_MAX = 63
TAGS_MAX = 16


@dataclass(frozen=True)
class Note:
    """What the author of a change says of it: OSMO's `description` and `tags`; `written`
    collects the revisions written under it."""

    description: str = ""
    tags: tuple[str, ...] = ()
    written: list[tuple[str, int]] = field(default_factory=list, compare=False)


_note: contextvars.ContextVar[Note | None] = contextvars.ContextVar("config_note", default=None)


@contextlib.contextmanager
def noted(note: Note) -> Iterator[None]:
    """Revisions written inside carry this description and these tags (a rollback's)."""
    token = _note.set(note)
    try:
        yield
    finally:
        _note.reset(token)


def current_note(default_description: str) -> Note:
    note = _note.get()
    if note is None:
        return Note(description=default_description)
    return Note(description=note.description or default_description, tags=note.tags)


def next_revision(model, config_type: str, *, using: str = "default") -> int:
    """The next revision number of this type; call inside the change's transaction, once, for
    the revision about to be written."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                       [REVISION_LOCK, _LOCK_KEYS[config_type]])
    latest = (model.objects.using(using).order_by("-revision")
              .values_list("revision", flat=True).first())
    revision = (latest or 0) + 1
    note = _note.get()
    if note is not None:
        note.written.append((config_type, revision))
    return revision


def diff(before: Any, after: Any) -> dict[str, dict[str, Any]]:
    """Field by field, what changed: `{field: {"before": old, "after": new}}`; a whole
    config that appears or disappears is every field of it against null."""
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    return {key: {"before": old.get(key), "after": new.get(key)}
            for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)}


def retagged(tags: list[str], *, add: list[str], remove: list[str]) -> list[str]:
    """A revision's tags with `add` added and `remove` taken away, sorted; at most TAGS_MAX."""
    result = sorted((set(tags) | set(add)) - set(remove))
    if len(result) > TAGS_MAX:
        raise OsmoError("invalid_request", f"A revision carries at most {TAGS_MAX} tags.",
                        errors={"set_tags": [f"At most {TAGS_MAX} tags in all."]})
    return result
