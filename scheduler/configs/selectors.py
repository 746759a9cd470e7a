"""Reads of the config history: revisions of POOL and BACKEND as one list, a type's whole
config at a revision, and the difference between two revisions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import CharField, F, Value

from osmo import config_history
from osmo.errors import NotFound
from pools.models import PoolEvent
from pools.selectors import pool_config_at

from ..models import BackendEvent

_COLUMNS = ("config_type", "item", "revision", "actor_name", "at", "description", "tags",
            "action", "before", "after")


@dataclass(frozen=True)
class HistoryQuery:
    config_types: tuple[str, ...] = config_history.CONFIG_TYPES
    name: str | None = None
    revision: int | None = None
    tags: tuple[str, ...] = ()
    created_before: datetime | None = None
    created_after: datetime | None = None
    at_timestamp: datetime | None = None
    descending: bool = False
    offset: int = 0
    limit: int = 20


def _events(config_type: str):
    if config_type == config_history.POOL:
        return PoolEvent.objects.annotate(
            config_type=Value(config_history.POOL, output_field=CharField()),
            item=F("pool__name"))
    return BackendEvent.objects.annotate(
        config_type=Value(config_history.BACKEND, output_field=CharField()),
        item=F("backend_name"))


def _filtered(config_type: str, query: HistoryQuery):
    events = _events(config_type)
    if query.name is not None:
        events = events.filter(item=query.name)
    if query.revision is not None:
        events = events.filter(revision=query.revision)
    if query.tags:
        events = events.filter(tags__contains=list(query.tags))
    if query.created_before is not None:
        events = events.filter(at__lt=query.created_before)
    if query.created_after is not None:
        events = events.filter(at__gt=query.created_after)
    return events


def revisions(query: HistoryQuery) -> list[dict[str, Any]]:
    """One page of revisions, newest first before `descending` orders the page (OSMO's rule:
    `offset` and `limit` count from the newest). With `at_timestamp`: each type's revision in
    force then (one row a type)."""
    if not query.config_types:
        return []
    if query.at_timestamp is not None:
        rows = []
        for config_type in query.config_types:
            row = (_filtered(config_type, query).filter(at__lte=query.at_timestamp)
                   .order_by("-revision").values(*_COLUMNS).first())
            if row is not None:
                rows.append(row)
    else:
        parts = [_filtered(t, query).values(*_COLUMNS) for t in query.config_types]
        union = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
        rows = list(union.order_by("-at", "-revision")[query.offset:query.offset + query.limit])
    rows.sort(key=lambda row: (row["at"], row["revision"]), reverse=query.descending)
    return rows


def revision_get(config_type: str, revision: int):
    """The event that is this revision, else 404 `revision_not_found`."""
    model = PoolEvent if config_type == config_history.POOL else BackendEvent
    event = model.objects.filter(revision=revision).first() if revision < 2**31 else None
    if event is None:
        raise NotFound("revision_not_found",
                       f"{config_type} has no revision {revision}.")
    return event


def config_at(config_type: str, revision: int) -> Any:
    """The type's whole config as it stood at `revision`, in OSMO's shape: POOL as `{"pools":
    {name: config}}`, BACKEND as a list of backends by name."""
    if config_type == config_history.POOL:
        return pool_config_at(revision)
    latest = (BackendEvent.objects.filter(revision__lte=revision)
              .order_by("backend_name", "-revision").distinct("backend_name")
              .values_list("after", flat=True))
    return sorted((after for after in latest if after), key=lambda backend: backend["name"])


def _by_name(config_type: str, data: Any) -> dict[str, dict]:
    items = data["pools"] if config_type == config_history.POOL else {b["name"]: b for b in data}
    return dict(items)


def config_diff(config_type: str, first: Any, second: Any) -> dict[str, dict]:
    """Name by name, the fields that differ between two whole configs (a name present on one
    side only differs in every field)."""
    old, new = _by_name(config_type, first), _by_name(config_type, second)
    changes = {}
    for name in sorted(old.keys() | new.keys()):
        fields = config_history.diff(old.get(name), new.get(name))
        if fields:
            changes[name] = fields
    return changes
